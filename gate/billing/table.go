package billing

import "sync/atomic"

// Table holds the price table in force. An operator's change (the
// replicated set_prices, docs/operations.md) swaps the whole table; every
// reader loads the table once per use, so a call is priced by one table.
type Table struct{ p atomic.Pointer[Prices] }

// NewTable holds p.
func NewTable(p *Prices) *Table {
	t := &Table{}
	t.p.Store(p)
	return t
}

// Load is the table in force.
func (t *Table) Load() *Prices { return t.p.Load() }

// Store puts p in force.
func (t *Table) Store(p *Prices) { t.p.Store(p) }

// CurrentPrices is the price table in force: Table's when set, else
// Prices.
func (c Config) CurrentPrices() *Prices {
	if c.Table != nil {
		return c.Table.Load()
	}
	return c.Prices
}
