package jsnode

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// A cell that lost its data directory comes back as a new peer: its
// server name ends with a new instance (Start), because a Raft peer that
// forgot what it acknowledged must not vote under its old identity. The
// old peer stays in the meta group, offline, for ever: it counts in the
// quorum (a region of three would then need three of four), and the
// streams keep a replica on it. So the meta leader removes it once the
// cell is back: an offline peer named for a cell that has another peer
// online (JetStream then places that peer's stream replicas elsewhere).

// replacedAfter is how long a peer must have been silent to count as
// replaced when its cell has another peer online.
const replacedAfter = 10 * time.Second

// peerCell is the "<region>-<cell>" of a server name
// "<region>-<cell>-<instance>".
func peerCell(name string) string {
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		return name[:i]
	}
	return name
}

// RemoveReplaced, on the meta leader, asks the meta group to remove the
// offline peers that a cell's newer peer replaced, and returns their
// names. Elsewhere, or on a standalone node, it does nothing.
func (n *Node) RemoveReplaced(ctx context.Context) ([]string, error) {
	if n.sys == nil || !n.srv.JetStreamIsLeader() {
		return nil, nil
	}
	jsz, err := n.srv.Jsz(&server.JSzOptions{})
	if err != nil || jsz.Meta == nil {
		return nil, err
	}
	// Gone: shut down (Offline), or not heard from for replacedAfter (a
	// killed server sends no shutdown event).
	gone := func(p *server.PeerInfo) bool { return p.Offline || (!p.Current && p.Active >= replacedAfter) }
	online := map[string]bool{peerCell(n.name): true}
	for _, p := range jsz.Meta.Replicas {
		if !gone(p) && p.Name != "" {
			online[peerCell(p.Name)] = true
		}
	}
	var removed []string
	for _, p := range jsz.Meta.Replicas {
		if !gone(p) || p.Name == "" || p.Name == n.name || !online[peerCell(p.Name)] {
			continue
		}
		req, _ := json.Marshal(server.JSApiMetaServerRemoveRequest{Server: p.Name})
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		msg, err := n.sys.RequestWithContext(rctx, server.JSApiRemoveServer, req)
		cancel()
		if err != nil {
			return removed, fmt.Errorf("jsnode: remove replaced peer %s: %w", p.Name, err)
		}
		var resp server.JSApiMetaServerRemoveResponse
		if err := json.Unmarshal(msg.Data, &resp); err != nil {
			return removed, fmt.Errorf("jsnode: remove replaced peer %s: %w", p.Name, err)
		}
		if resp.Error != nil {
			return removed, fmt.Errorf("jsnode: remove replaced peer %s: %s", p.Name, resp.Error.Description)
		}
		n.cfg.Logger.Warn("jsnode: removed a peer its cell replaced (it came back with a new data directory)", "peer", p.Name)
		removed = append(removed, p.Name)
		// One membership change at a time: the next on the next round.
		break
	}
	return removed, nil
}
