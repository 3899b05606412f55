package ledger

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/trawlhq/trawl/internal/store"
)

// The monitor registry: the account-wide monitor limits of
// docs/spec/hosted-api.md §8 (100 monitors per account, 20 of them running
// faster than hourly, 500 per host across all accounts) counted in Raft
// order, so every region sees the same numbers and two regions cannot
// both take the last place. A cell takes a monitor's place before it
// creates it (MonitorAdd), changes whether it counts as fast when it is
// patched or paused (MonitorSet), and gives it back when the monitor is
// deleted (MonitorRemove). The limits travel in the command: Apply reads
// no configuration.

// CmdMonitorSlot takes, changes or gives back one monitor's place.
const CmdMonitorSlot = "monitor_slot"

// Monitor slot operations.
const (
	MonitorAdd    = "add"
	MonitorSet    = "set"
	MonitorRemove = "remove"
)

// ErrCodeMonitorLimit refuses a monitor over a limit; the Result's
// Message is the spec's text.
const ErrCodeMonitorLimit = "monitor_limit"

// MonitorSlot is the command's body.
type MonitorSlot struct {
	Op      string `json:"op"`
	Monitor string `json:"monitor"`
	Account string `json:"account,omitempty"`
	Host    string `json:"host,omitempty"`
	// Fast: running and checked more often than hourly.
	Fast   bool          `json:"fast,omitempty"`
	Limits MonitorLimits `json:"limits"`
}

// MonitorLimits are the operator's limits (--monitor-limits).
type MonitorLimits struct {
	Account int `json:"account"`
	Fast    int `json:"fast"`
	Host    int `json:"host"`
}

// MonitorCounts are an account's and a host's counts.
type MonitorCounts struct {
	Account, Fast, Host int
}

type monitorEntry struct {
	Account string `json:"account"`
	Host    string `json:"host"`
	Fast    bool   `json:"fast,omitempty"`
}

func keyMonitor(id string) []byte { return []byte(store.PrefixLedger + "mon/" + id) }
func keyMonitorCount(kind, name string) []byte {
	return []byte(store.PrefixLedger + "monn/" + kind + "/" + name)
}

func readCount(r reader, key []byte) (int, error) {
	v, err := r.Get(key)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	} else if err != nil {
		return 0, err
	}
	return strconv.Atoi(string(v))
}

func (t *tx) addCount(key []byte, d int) error {
	n, err := readCount(t.r, key)
	if err != nil {
		return err
	}
	if n+d <= 0 {
		t.b.Delete(key)
		return nil
	}
	t.b.Set(key, []byte(strconv.Itoa(n+d)))
	return nil
}

func (t *tx) monitorSlot(c *MonitorSlot) error {
	if c == nil || c.Monitor == "" {
		return refuse(ErrCodeInvalid, "monitor_slot needs a monitor")
	}
	var cur monitorEntry
	have, err := getJSON(t.r, keyMonitor(c.Monitor), &cur)
	if err != nil {
		return err
	}
	switch c.Op {
	case MonitorAdd:
		if have {
			return refuse(ErrCodeExists, "monitor %q has its place", c.Monitor)
		}
		if c.Account == "" || c.Host == "" {
			return refuse(ErrCodeInvalid, "monitor_slot add needs an account and a host")
		}
		n, err := t.monitorCounts(c.Account, c.Host)
		if err != nil {
			return err
		}
		switch {
		case n.Account >= c.Limits.Account:
			return refuse(ErrCodeMonitorLimit, "at most %d monitors per account", c.Limits.Account)
		case c.Fast && n.Fast >= c.Limits.Fast:
			return refuse(ErrCodeMonitorLimit, "at most %d running monitors checked more often than every 1h per account", c.Limits.Fast)
		case n.Host >= c.Limits.Host:
			return refuse(ErrCodeMonitorLimit, "this site has too many monitors already")
		}
		e := monitorEntry{Account: c.Account, Host: c.Host, Fast: c.Fast}
		t.putJSON(keyMonitor(c.Monitor), &e)
		return t.countMonitor(&e, 1)
	case MonitorSet:
		if !have {
			return refuse(ErrCodeInvalid, "monitor %q has no place", c.Monitor)
		}
		if c.Fast == cur.Fast {
			return nil
		}
		if c.Fast {
			n, err := t.monitorCounts(cur.Account, cur.Host)
			if err != nil {
				return err
			}
			if n.Fast >= c.Limits.Fast {
				return refuse(ErrCodeMonitorLimit, "at most %d running monitors checked more often than every 1h per account", c.Limits.Fast)
			}
		}
		d := -1
		if c.Fast {
			d = 1
		}
		cur.Fast = c.Fast
		t.putJSON(keyMonitor(c.Monitor), &cur)
		return t.addCount(keyMonitorCount("f", cur.Account), d)
	case MonitorRemove:
		if !have {
			return nil // gone already: removing twice is removing once
		}
		t.b.Delete(keyMonitor(c.Monitor))
		return t.countMonitor(&cur, -1)
	}
	return refuse(ErrCodeInvalid, "monitor_slot op %q: want add, set or remove", c.Op)
}

// countMonitor adds d to the counts e is in. A command writes each count
// once, so reading the committed value is reading its own state.
func (t *tx) countMonitor(e *monitorEntry, d int) error {
	if err := t.addCount(keyMonitorCount("a", e.Account), d); err != nil {
		return err
	}
	if e.Fast {
		if err := t.addCount(keyMonitorCount("f", e.Account), d); err != nil {
			return err
		}
	}
	return t.addCount(keyMonitorCount("h", e.Host), d)
}

func (t *tx) monitorCounts(account, host string) (MonitorCounts, error) {
	return monitorCounts(t.r, account, host)
}

func monitorCounts(r reader, account, host string) (n MonitorCounts, err error) {
	if n.Account, err = readCount(r, keyMonitorCount("a", account)); err != nil {
		return n, fmt.Errorf("monitor counts: %w", err)
	}
	if n.Fast, err = readCount(r, keyMonitorCount("f", account)); err != nil {
		return n, fmt.Errorf("monitor counts: %w", err)
	}
	if n.Host, err = readCount(r, keyMonitorCount("h", host)); err != nil {
		return n, fmt.Errorf("monitor counts: %w", err)
	}
	return n, nil
}

// MonitorCounts returns account's counts and host's, as this replica has
// applied them.
func (s *State) MonitorCounts(account, host string) (MonitorCounts, error) {
	return monitorCounts(s.st, account, host)
}
