package ledger

import (
	"time"

	"github.com/trawlhq/trawl/internal/store"
)

// OldestUnsettled is the time of the oldest charge journaled in this
// region and not yet settled into the ledger; ok is false when every
// charge is settled. Now minus it is the settlement lag
// (docs/operations.md, "Metrics").
func (c *HoldsClient) OldestUnsettled() (t time.Time, ok bool, err error) {
	err = c.cfg.Store.Scan([]byte(store.PrefixHolds+"c/"), nil, func(_, v []byte) (bool, error) {
		var ch Charge
		if err := decodeCharge(v, &ch); err != nil {
			return false, err
		}
		t, ok = ch.Time, true
		return false, nil
	})
	return t, ok, err
}
