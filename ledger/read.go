package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// ErrNotFound is returned by reads of a missing account or key.
var ErrNotFound = errors.New("ledger: not found")

// Account reads an account from this replica.
func (s *State) Account(id string) (*Account, error) {
	var a Account
	ok, err := getJSON(s.st, keyAccount(id), &a)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, ErrNotFound
	}
	return &a, nil
}

// KeyByHash finds a key by the hex SHA-256 of its secret.
func (s *State) KeyByHash(hash string) (*Key, error) {
	var k Key
	ok, err := getJSON(s.st, keyKey(hash), &k)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, ErrNotFound
	}
	return &k, nil
}

// Balance of one ledger account on this replica.
func (s *State) Balance(ledgerAccount string) (MC, error) { return balance(s.st, ledgerAccount) }

// AccountBalance is a customer's credit as this replica sees it.
type AccountBalance struct {
	Total   MC            `json:"total_mc"`   // buckets + holds
	Buckets map[string]MC `json:"buckets_mc"` // per bucket, not counting holds
	Holds   map[string]MC `json:"holds_mc"`   // per region
}

// AccountBalance sums a customer's buckets and holds at time now (a lapsed
// pass does not count).
func (s *State) AccountBalance(a *Account, now time.Time) (*AccountBalance, error) {
	out := &AccountBalance{Buckets: map[string]MC{}, Holds: map[string]MC{}}
	for _, bk := range SpendOrder {
		v, err := balance(s.st, BucketAccount(a.ID, bk))
		if err != nil {
			return nil, err
		}
		if bk == BucketPass && !now.Before(a.PassExpires) {
			v = 0
		}
		out.Buckets[bk] = v
		out.Total += v
	}
	var regions []string
	err := s.st.Scan(prefixHolds(a.ID), nil, func(k, _ []byte) (bool, error) {
		regions = append(regions, string(k[len(prefixHolds(a.ID)):]))
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	for _, r := range regions {
		v, err := balance(s.st, HoldAccount(a.ID, r))
		if err != nil {
			return nil, err
		}
		out.Holds[r] = v
		out.Total += v
	}
	return out, nil
}

// Journal calls fn for each entry with index > after, in order.
func (s *State) Journal(after uint64, fn func(*Entry) (bool, error)) error {
	return journal(s.st, after, fn)
}

func journal(r reader, after uint64, fn func(*Entry) (bool, error)) error {
	return r.Scan(prefixJournal(), keyJournal(after+1), func(_, v []byte) (bool, error) {
		var e Entry
		if err := json.Unmarshal(v, &e); err != nil {
			return false, err
		}
		return fn(&e)
	})
}

// AuditReport is what an audit found.
type AuditReport struct {
	Entries    uint64   `json:"entries"`
	LastHash   string   `json:"last_hash"`
	StateHash  string   `json:"state_hash"`
	Violations []string `json:"violations"`
}

// OK is true when no invariant is violated.
func (r *AuditReport) OK() bool { return len(r.Violations) == 0 }

// Audit verifies the journal of this replica: every entry's hash and its link
// to the one before, that balances recomputed from the journal equal the
// stored ones and sum to zero, and that every receipt is charged at most
// once. StateHash digests the balances, so replicas at the same index can be
// compared.
func (s *State) Audit() (*AuditReport, error) {
	snap := s.st.NewSnapshot()
	defer snap.Close()
	return audit(snap)
}

func audit(r reader) (*AuditReport, error) {
	rep := &AuditReport{Violations: []string{}}
	add := func(format string, args ...any) {
		if len(rep.Violations) < 100 {
			rep.Violations = append(rep.Violations, fmt.Sprintf(format, args...))
		}
	}
	prev := GenesisHash
	want := map[string]MC{}
	receipts := map[string]uint64{}
	var n uint64
	err := journal(r, 0, func(e *Entry) (bool, error) {
		n++
		if e.Index != n {
			add("entry %d: index %d out of sequence", n, e.Index)
		}
		if e.PrevHash != prev {
			add("entry %d: prev_hash %s does not link to %s", e.Index, e.PrevHash, prev)
		}
		if h := e.ComputeHash(); h != e.Hash {
			add("entry %d: hash %s, content hashes to %s", e.Index, e.Hash, h)
		}
		if e.Amount <= 0 {
			add("entry %d: amount %s is not positive", e.Index, e.Amount)
		}
		if e.Kind == KindCharge {
			if first, dup := receipts[e.Receipt]; dup {
				add("receipt %s charged twice (entries %d and %d)", e.Receipt, first, e.Index)
			} else {
				receipts[e.Receipt] = e.Index
			}
		}
		want[e.Debit] -= e.Amount
		want[e.Credit] += e.Amount
		prev = e.Hash
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	rep.Entries, rep.LastHash = n, prev
	meta, err := readMeta(r)
	if err != nil {
		return nil, err
	}
	if meta.Entries != n || (n > 0 && meta.LastHash != prev) {
		add("meta says %d entries ending %s; journal has %d ending %s", meta.Entries, meta.LastHash, n, prev)
	}
	var sum MC
	got := map[string]MC{}
	err = r.Scan(prefixBalances(), nil, func(k, v []byte) (bool, error) {
		got[string(k[len(prefixBalances()):])] = decodeBal(v)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(got))
	for a := range got {
		names = append(names, a)
	}
	for a := range want {
		if _, ok := got[a]; !ok {
			names = append(names, a)
		}
	}
	sort.Strings(names)
	h := sha256.New()
	for _, a := range names {
		if got[a] != want[a] {
			add("account %s: stored balance %s, journal gives %s", a, got[a], want[a])
		}
		if strings.HasPrefix(a, "hold:") && got[a] < 0 {
			add("hold %s is negative (%s): overdraft", a, got[a])
		}
		sum += got[a]
		if got[a] != 0 {
			fmt.Fprintf(h, "%s=%d\n", a, got[a])
		}
	}
	if sum != 0 {
		add("balances sum to %s, not zero", sum)
	}
	fmt.Fprintf(h, "entries=%d last=%s\n", n, prev)
	rep.StateHash = hex.EncodeToString(h.Sum(nil))
	return rep, nil
}
