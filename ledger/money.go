// Package ledger keeps the credits: a Raft group with one voter per region
// holding accounts, API keys, grants and balances, with a double-entry,
// hash-chained journal an auditor can verify, and regional holds so a charge
// never waits on another continent.
//
// The replicated state (what snapshots, follower installs and joins copy)
// is proportional to the accounts and open holds: the journal is each
// replica's own record, a snapshot carries its head. Restores are
// crash-atomic, the calendar month turns with the commands' own time, and a
// charge the ledger cannot take is parked rather than jamming settlement.
// docs/ledger.md has the whole design.
package ledger

import (
	"fmt"
	"strconv"
	"strings"
)

// MC is an amount in millicredits. Every amount in the ledger is an integer
// number of millicredits; only receipts and bodies show decimals.
type MC int64

// Credits is n whole credits.
func Credits(n int64) MC { return MC(n * 1000) }

// String formats the amount as credits with three decimals: "12.345".
func (m MC) String() string {
	sign := ""
	v := int64(m)
	if v < 0 {
		sign, v = "-", -v
	}
	return fmt.Sprintf("%s%d.%03d", sign, v/1000, v%1000)
}

// ParseMC reads a decimal credit amount with at most three decimals.
func ParseMC(s string) (MC, error) {
	s = strings.TrimSpace(s)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" || len(frac) > 3 {
		return 0, fmt.Errorf("amount %q: want credits with at most three decimals", s)
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("amount %q: %w", s, err)
	}
	f := int64(0)
	if frac != "" {
		frac += strings.Repeat("0", 3-len(frac))
		if f, err = strconv.ParseInt(frac, 10, 64); err != nil {
			return 0, fmt.Errorf("amount %q: %w", s, err)
		}
	}
	v := MC(w*1000 + f)
	if neg {
		v = -v
	}
	return v, nil
}
