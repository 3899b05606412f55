package raftpebble_test

import (
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"

	"github.com/trawlhq/trawl/ledger/raftpebble"
)

func ExampleOpen() {
	// In production: Open(dataDir, nil) on the real filesystem, then pass
	// the same *Store as both the LogStore and the StableStore:
	// raft.NewRaft(conf, fsm, store, store, snapshots, transport).
	store, err := raftpebble.Open("raft", &raftpebble.Options{
		FS:     vfs.NewMem(),
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()

	_ = store.StoreLogs([]*raft.Log{
		{Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte("a")},
		{Index: 2, Term: 1, Type: raft.LogCommand, Data: []byte("b")},
		{Index: 3, Term: 2, Type: raft.LogCommand, Data: []byte("c")},
	})
	_ = store.DeleteRange(1, 1) // compaction after a snapshot

	first, _ := store.FirstIndex()
	last, _ := store.LastIndex()
	var l raft.Log
	_ = store.GetLog(last, &l)
	fmt.Println(first, last, l.Term, string(l.Data))

	_, err = store.Get([]byte("LastVoteCand"))
	fmt.Println(err)
	// Output:
	// 2 3 2 c
	// not found
}
