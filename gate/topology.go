package gate

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"

	"github.com/trawlhq/trawl/internal/members"
)

// Topology is the dev topology of regions on one machine: region i's gate
// listens on listen's port + i and its voter on raft's port + i; every gate
// knows the others as peers; data lives in data/<region>/gate.
func Topology(regions []string, listen, raft, data string) ([]Site, error) {
	gates, err := followPorts(listen, len(regions))
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	rafts, err := followPorts(raft, len(regions))
	if err != nil {
		return nil, fmt.Errorf("ledger raft: %w", err)
	}
	seen := map[string]bool{}
	peers := make([]Peer, len(regions))
	for i, r := range regions {
		if !nameRe.MatchString(r) || seen[r] {
			return nil, fmt.Errorf("region %q: want distinct names of [a-z0-9]{1,16}", r)
		}
		seen[r] = true
		peers[i] = Peer{Region: r, Raft: rafts[i], Gate: gates[i]}
	}
	sites := make([]Site, len(regions))
	for i, r := range regions {
		var others []Peer
		for j, p := range peers {
			if j != i {
				others = append(others, p)
			}
		}
		sites[i] = Site{
			Listen: gates[i],
			Gate: Config{
				Region: r, DataDir: filepath.Join(data, r, "gate"), LedgerRaft: rafts[i],
				Peers: others, Bootstrap: true, Members: members.Config{Bind: "127.0.0.1:0"},
			},
			Public: []string{"/demo/*"},
		}
	}
	return sites, nil
}

// followPorts returns n addresses: addr, then the same host with the
// following ports.
func followPorts(addr string, n int) ([]string, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port <= 0 || port+n-1 > 65535 {
		return nil, fmt.Errorf("%q: want a fixed port", addr)
	}
	out := make([]string, n)
	for i := range out {
		out[i] = net.JoinHostPort(host, strconv.Itoa(port+i))
	}
	return out, nil
}
