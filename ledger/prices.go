package ledger

import (
	"encoding/json"
	"errors"

	"github.com/trawlhq/trawl/internal/store"
)

// The price table as ledger state. The gate's table (gate/billing.Prices)
// starts from its --prices file or the built-in one; an operator who
// changes it (PUT /operator/v1/prices, docs/operations.md) sends set_prices,
// and every region's gate takes the replicated table from its replica. The
// ledger does not read the table: it stores the JSON the gate validated, so
// the ledger package needs no billing types and Apply reads no
// configuration. A table once set here wins over every gate's file.

// CmdSetPrices replaces the replicated price table.
const CmdSetPrices = "set_prices"

// RoleOperator is the role of an operator's key: the gates' /operator/
// routes (docs/operations.md), never a customer's.
const RoleOperator = "operator"

// SetPrices is set_prices' body: the whole table, as GET /v1/prices
// shows it. Version is what the sender read before its change (0: none was
// set): a table changed since is refused (ErrCodeConflict), so two
// operators cannot overwrite each other's change unseen.
type SetPrices struct {
	Table   json.RawMessage `json:"table"`
	Version uint64          `json:"version"`
}

// ErrCodeConflict refuses a set_prices whose Version is not the current
// one.
const ErrCodeConflict = "conflict"

// PriceTable is the replicated table and its version: the Raft index of
// the set_prices that wrote it, the same on every replica.
type PriceTable struct {
	Table   json.RawMessage `json:"table"`
	Version uint64          `json:"version"`
}

var keyPrices = []byte(store.PrefixLedger + "prices")

func (t *tx) setPrices(p *SetPrices, index uint64) error {
	if p == nil || len(p.Table) == 0 || p.Table[0] != '{' || !json.Valid(p.Table) {
		return refuse(ErrCodeInvalid, "set_prices needs the table, a JSON object")
	}
	var cur PriceTable
	if _, err := getJSON(t.r, keyPrices, &cur); err != nil {
		return err
	}
	if p.Version != cur.Version {
		return refuse(ErrCodeConflict, "the price table changed since version %d (now %d): read it again", p.Version, cur.Version)
	}
	t.putJSON(keyPrices, &PriceTable{Table: p.Table, Version: index})
	return nil
}

// PriceTable is the replicated price table; ok is false when no operator
// has set one.
func (s *State) PriceTable() (pt *PriceTable, ok bool, err error) {
	pt = &PriceTable{}
	ok, err = getJSON(s.st, keyPrices, pt)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, false, err
	}
	return pt, ok, nil
}
