package main

import (
	"context"
	"time"

	"github.com/trawlhq/trawl/ledger"
)

// compact sends the ledger's compact command (bench/run.sh replaces this
// file with a no-op when it builds a commit that has none).
func compact(ctx context.Context, n *ledger.Node, id string, at, before time.Time) error {
	return submit(ctx, n, &ledger.Command{ID: id, Type: ledger.CmdCompact, Time: at, Compact: &ledger.Compact{Before: before}})
}
