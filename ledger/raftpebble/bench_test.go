package raftpebble

import (
	"log/slog"
	"testing"

	"github.com/hashicorp/raft"
	raftbench "github.com/hashicorp/raft/bench"
)

// The benchmarks run hashicorp/raft's shared store benchmarks against
// raft's InmemStore (the baseline) and this Store on the real filesystem,
// both with fsync on every write (as in production) and without:
//
//	go test -run '^$' -bench . ./ledger/raftpebble/

type logStableStore interface {
	raft.LogStore
	raft.StableStore
}

var benchStores = []struct {
	name string
	open func(b *testing.B) logStableStore
}{
	{"inmem", func(*testing.B) logStableStore { return raft.NewInmemStore() }},
	{"pebble-sync", func(b *testing.B) logStableStore { return openBench(b, false) }},
	{"pebble-nosync", func(b *testing.B) logStableStore { return openBench(b, true) }},
}

func openBench(b *testing.B, noSync bool) *Store {
	s, err := Open(b.TempDir(), &Options{
		Logger: slog.New(slog.NewTextHandler(b.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
		NoSync: noSync,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func runStores(b *testing.B, fn func(*testing.B, logStableStore)) {
	for _, st := range benchStores {
		b.Run("store="+st.name, func(b *testing.B) { fn(b, st.open(b)) })
	}
}

func logBench(f func(*testing.B, raft.LogStore)) func(*testing.B, logStableStore) {
	return func(b *testing.B, s logStableStore) { f(b, s) }
}

func stableBench(f func(*testing.B, raft.StableStore)) func(*testing.B, logStableStore) {
	return func(b *testing.B, s logStableStore) { f(b, s) }
}

func BenchmarkFirstIndex(b *testing.B)  { runStores(b, logBench(raftbench.FirstIndex)) }
func BenchmarkLastIndex(b *testing.B)   { runStores(b, logBench(raftbench.LastIndex)) }
func BenchmarkGetLog(b *testing.B)      { runStores(b, logBench(raftbench.GetLog)) }
func BenchmarkStoreLog(b *testing.B)    { runStores(b, logBench(raftbench.StoreLog)) }
func BenchmarkStoreLogs(b *testing.B)   { runStores(b, logBench(raftbench.StoreLogs)) }
func BenchmarkDeleteRange(b *testing.B) { runStores(b, logBench(raftbench.DeleteRange)) }
func BenchmarkSet(b *testing.B)         { runStores(b, stableBench(raftbench.Set)) }
func BenchmarkGet(b *testing.B)         { runStores(b, stableBench(raftbench.Get)) }
func BenchmarkSetUint64(b *testing.B)   { runStores(b, stableBench(raftbench.SetUint64)) }
func BenchmarkGetUint64(b *testing.B)   { runStores(b, stableBench(raftbench.GetUint64)) }
