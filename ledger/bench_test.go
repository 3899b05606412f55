package ledger_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/store"
	. "github.com/trawlhq/trawl/ledger"
	"github.com/trawlhq/trawl/ledger/ledgertest"
)

// BenchmarkClientCharge measures durable charges through the holds client:
// each Charge returns only after its journal write is synced. Many callers
// at once, as a gate has; the region's settle loop runs meanwhile.
func BenchmarkClientCharge(b *testing.B) {
	for _, par := range []int{1, 64, 512} {
		b.Run(fmt.Sprintf("callers=%d", par*2), func(b *testing.B) {
			d := ledgertest.NewDirect(newDiskState(b))
			ctx := context.Background()
			accts := make([]string, 100)
			for i := range accts {
				accts[i] = fmt.Sprintf("acct%d", i)
				d.Submit(ctx, &Command{ID: "c" + accts[i], Type: CmdCreateAccount, Time: t0, CreateAccount: &CreateAccount{Account: accts[i], Plan: PlanFree}})
				d.Submit(ctx, &Command{ID: "g" + accts[i], Type: CmdGrant, Time: t0, Grant: &Grant{Account: accts[i], Bucket: BucketSignup, Amount: Credits(1 << 30)}})
			}
			st := openBenchStore(b)
			c, err := NewHoldsClient(HoldsConfig{Region: "eu", Store: st, Ledger: d, MinHold: Credits(1 << 20), MaxHold: Credits(1 << 24), Logger: quiet()})
			if err != nil {
				b.Fatal(err)
			}
			c.Start()
			defer c.Close()
			var n atomic.Int64
			b.SetParallelism(par)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					if err := c.Charge(ctx, accts[i%100], fmt.Sprintf("r%d", i), 1000); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "charges/s")
		})
	}
}

func newDiskState(b *testing.B) *State {
	s, err := OpenState(openBenchStore(b))
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkApplySettle measures the FSM applying settles of 1,000 charges
// (every replica applies every region's charges).
func BenchmarkApplySettle(b *testing.B) {
	s := newDiskState(b)
	idx := uint64(0)
	apply := func(c *Command) {
		idx++
		if _, err := s.Apply(c, idx); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 100 {
		a := fmt.Sprintf("acct%d", i)
		apply(&Command{ID: "c" + a, Type: CmdCreateAccount, Time: t0, CreateAccount: &CreateAccount{Account: a, Plan: PlanFree}})
		apply(&Command{ID: "g" + a, Type: CmdGrant, Time: t0, Grant: &Grant{Account: a, Bucket: BucketSignup, Amount: Credits(1 << 30)}})
		apply(&Command{ID: "h" + a, Type: CmdHold, Time: t0, Hold: &HoldRequest{Account: a, Region: "eu", Want: Credits(1 << 29)}})
	}
	b.ResetTimer()
	for n := range b.N {
		charges := make([]Charge, 1000)
		for i := range charges {
			charges[i] = Charge{Account: fmt.Sprintf("acct%d", i%100), Receipt: fmt.Sprintf("r%d-%d", n, i), Amount: 1000, Time: t0, Seq: uint64(n*1000 + i + 1)}
		}
		apply(&Command{ID: fmt.Sprintf("s%d", n), Type: CmdSettle, Time: t0, Settle: &Settle{Region: "eu", Epoch: "e1", Charges: charges}})
	}
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "charges/s")
}

func openBenchStore(b *testing.B) *store.Store {
	st, err := store.Open(b.TempDir(), &store.Options{Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}
