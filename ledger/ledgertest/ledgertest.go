// Package ledgertest runs the ledger for tests and benchmarks, in one
// process on loopback:
//
//   - Cluster: voters (ledger.Node) on 127.0.0.1, .2, .3, … with real TCP
//     between them and their data in directories that outlive a restart;
//     start, stop and restart voters, add one, wait for a leader by
//     polling, wait for the replicas to converge and audit them.
//   - Net: the network between them, through the seams a node takes in
//     production (its Raft dialer and its HTTP client): cut a node off,
//     heal it, delay links.
//   - Direct: a ledger.Submitter over one State, without Raft, with faults
//     (down, cut off, failures, lost replies).
//
// Everything fails with an error, for benchmark commands; New and Audit are
// the testing.TB forms. The Raft-level part (servers started and stopped by
// id, a leader found by polling) is package rafttest, which the Raft log
// store's tests use too.
package ledgertest

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/trawlhq/trawl/ledger"
)

// Quiet is a logger that drops everything.
func Quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// FastRaft is a Raft configuration for tests: elections in a few hundred
// milliseconds, snapshots every 200 entries (so tests cross snapshots and
// log compaction). Short enough for fast tests, long enough that a loaded
// 2-core CI machine (the race detector, other packages' tests) does not
// flap.
func FastRaft() ledger.RaftConfig {
	return ledger.RaftConfig{
		HeartbeatTimeout:   300 * time.Millisecond,
		ElectionTimeout:    300 * time.Millisecond,
		LeaderLeaseTimeout: 200 * time.Millisecond,
		CommitTimeout:      5 * time.Millisecond,
		SnapshotThreshold:  200,
		TrailingLogs:       50,
		SnapshotInterval:   200 * time.Millisecond,
	}
}

// Audit audits s and fails t unless the audit passes.
func Audit(t testing.TB, s *ledger.State) *ledger.AuditReport {
	t.Helper()
	rep, err := s.Audit()
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("audit: %v", rep.Violations)
	}
	return rep
}
