package gate

import (
	"net/http"
	"sync"
	"time"

	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/ledger"
)

// replicaCache keeps what every request reads from the ledger replica — the
// key and its account, the account's balance — for as long as the
// replica's applied index has not moved. The index is read before the
// data, so an entry is never older than the index it is filed under; any
// command applied (a revocation, a settle, a grant) moves the index and
// retires every entry at once. Decoding the key and account from the
// store was the gate's largest cost per request (docs/performance.md).
type replicaCache struct {
	state *ledger.State
	mu    sync.Mutex
	keys  map[string]keyEntry // by key hash
	bals  map[string]balEntry // by account
}

type keyEntry struct {
	idx  uint64
	key  *ledger.Key
	acct *ledger.Account
}

type balEntry struct {
	idx   uint64
	until time.Time // balances also move with the clock (a pass lapses)
	total ledger.MC
	mark  uint64 // the region journal's settle mark in the same view
}

// maxCached bounds each map; past it the map starts afresh.
const maxCached = 50_000

// balanceFor is how long a cached balance holds with the index unmoved.
const balanceFor = time.Second

func newReplicaCache(state *ledger.State) *replicaCache {
	return &replicaCache{state: state, keys: map[string]keyEntry{}, bals: map[string]balEntry{}}
}

// Authenticate is billing.Authenticate through the cache. The key and
// account returned are shared: callers must not change them.
func (c *replicaCache) Authenticate(r *http.Request, now time.Time) (*ledger.Key, *ledger.Account, error) {
	hash, err := billing.RequestKeyHash(r)
	if err != nil {
		return nil, nil, err
	}
	idx := c.state.Meta().AppliedIndex
	c.mu.Lock()
	e, ok := c.keys[hash]
	c.mu.Unlock()
	if !ok || e.idx != idx {
		k, a, err := billing.LookupKey(c.state, hash)
		if err != nil {
			return nil, nil, err
		}
		e = keyEntry{idx: idx, key: k, acct: a}
		c.mu.Lock()
		if len(c.keys) >= maxCached {
			c.keys = map[string]keyEntry{}
		}
		c.keys[hash] = e
		c.mu.Unlock()
	}
	if err := billing.CheckKey(e.key, now); err != nil {
		return nil, nil, err
	}
	return e.key, e.acct, nil
}

// total is the account's balance in the replica and the settle mark of
// this region's journal, read together (ledger.State.BalanceView), through
// the cache.
func (c *replicaCache) total(a *ledger.Account, now time.Time, region, epoch string) (ledger.MC, uint64, error) {
	idx := c.state.Meta().AppliedIndex
	c.mu.Lock()
	e, ok := c.bals[a.ID]
	c.mu.Unlock()
	if ok && e.idx == idx && now.Before(e.until) {
		return e.total, e.mark, nil
	}
	v, err := c.state.BalanceView(a.ID, now, region, epoch)
	if err != nil {
		return 0, 0, err
	}
	c.mu.Lock()
	if len(c.bals) >= maxCached {
		c.bals = map[string]balEntry{}
	}
	c.bals[a.ID] = balEntry{idx: v.Index, until: now.Add(balanceFor), total: v.Balance.Total, mark: v.Mark}
	c.mu.Unlock()
	return v.Balance.Total, v.Mark, nil
}

// Authenticate finds the request's key and account in the local replica
// (billing.Authenticate, cached while the replica does not move).
func (rt *Runtime) Authenticate(r *http.Request) (*ledger.Key, *ledger.Account, error) {
	return rt.replica.Authenticate(r, rt.cfg.Now())
}

// Balance is what the account can spend as this region sees it: the
// replica's balance less this region's unsettled charges (the
// x-svc-balance header).
func (rt *Runtime) Balance(a *ledger.Account) (ledger.MC, error) {
	region, epoch := rt.holds.Journal()
	total, mark, err := rt.replica.total(a, rt.cfg.Now(), region, epoch)
	if err != nil {
		return 0, err
	}
	return total - rt.holds.UnsettledAt(a.ID, mark), nil
}
