package jsnode

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
)

// How a node with a new data directory enters its region's JetStream
// meta group. nats-server's own bootstrap (no peer state on disk) assumes
// at least two peers and campaigns at once with an empty log, counting a
// vote from every server that answers ("voted in by all servers"). That
// fails trawl two ways:
//
//   - A first cell alone never elects a leader (it waits for a second
//     peer), yet the design wants one cell clustered from the start, so
//     that it grows without a restart into another mode.
//   - Two new cells joining a running one-cell region at once can elect
//     one of themselves on their two empty votes, a second meta group
//     beside the first one's data (seen in TestGrowOneToThree under -race
//     before this file's join rule).
//
// So Start writes the meta group's peer state itself before the server
// starts, in the three cases it can tell apart:
//
//   - No peer: a cluster of one (itself, size 1). The server "recovers"
//     that state and elects itself after its election timeout (4–9 s);
//     peers that join later are added as any leader adds them (raft
//     trackPeer → ProposeAddPeer). witness.go gives it the one route
//     every Raft group waits for.
//   - Peers with a meta leader (probe.go asks them): itself with a size
//     no group of newcomers can reach, so it never wins an election and
//     only follows; the leader's peer state replaces the size when the
//     node first hears from it (raft processPeerState).
//   - Peers without a leader: they are starting too (trawl dev --cells 3,
//     a new region); the server's own bootstrap, all together.
//
// The file's format and place are nats-server's (raft.go encodePeerState,
// peerStateFile; jetstream_cluster.go setupMetaGroup), pinned to the
// version in go.mod; TestGrowOneToThree breaks if they change.
//
// What remains is the bootstrap problem of any consensus system: two
// cells that each start alone with a new data directory form two
// clusters. Cells start NATS after membership has had its chance to find
// the region (§1).

// joinClusterSize is the meta group size a joining node assumes until its
// leader tells it the real one: larger than any region.
const joinClusterSize = 99

const (
	sysAccount   = "$SYS"   // server.DEFAULT_SYSTEM_ACCOUNT
	metaGroupDir = "_meta_" // defaultMetaGroupName
	jsStoreDir   = "_js_"   // defaultStoreDirName
	peersFile    = "peers.idx"
)

// metaDir is where the server keeps the meta group's Raft state.
func metaDir(dir string) string {
	return filepath.Join(dir, "jetstream", sysAccount, jsStoreDir, metaGroupDir)
}

// hasMetaState reports whether dir holds the meta group's peer state.
func hasMetaState(dir string) bool {
	_, err := os.Stat(filepath.Join(metaDir(dir), peersFile))
	return err == nil
}

// seedMeta writes the peer state of a meta group of size that knows only
// the server named name.
func seedMeta(dir, name string, size int) error {
	md := metaDir(dir)
	if err := os.MkdirAll(md, 0o750); err != nil {
		return fmt.Errorf("jsnode: %w", err)
	}
	id := peerID(name)
	buf := make([]byte, 8+len(id)+2)
	binary.LittleEndian.PutUint32(buf[0:], uint32(size)) // cluster size
	binary.LittleEndian.PutUint32(buf[4:], 1)            // known peers
	copy(buf[8:], id)
	// The last two bytes are the domain extension state, 0: undetermined.
	if err := os.WriteFile(filepath.Join(md, peersFile), buf, 0o640); err != nil {
		return fmt.Errorf("jsnode: seed meta group: %w", err)
	}
	return nil
}

// peerID is the Raft peer id nats-server gives a server name (events.go
// getHash: 8 base-62 digits of its SHA-256).
func peerID(name string) string {
	const digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	sum := sha256.Sum256([]byte(name))
	b := make([]byte, 8)
	for i := range b {
		b[i] = digits[int(sum[i])%len(digits)]
	}
	return string(b)
}

// HasState reports whether dir (a node's Dir) already holds the meta
// group's peer state: a node started on it rejoins as the peer it was,
// rather than entering its region as a new one.
func HasState(dir string) bool { return hasMetaState(dir) }
