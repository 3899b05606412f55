package ledger

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/trawlhq/trawl/internal/store"
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

// KeyByID finds a key by its id.
func (s *State) KeyByID(id string) (*Key, error) {
	h, err := s.st.Get(keyKeyID(id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return s.KeyByHash(string(h))
}

// AccountKeys returns an account's keys, revoked and expired ones too, oldest
// first (ties by id), read through the account's key index.
func (s *State) AccountKeys(account string) ([]*Key, error) {
	var out []*Key
	err := s.st.Scan(prefixAcctKeys(account), nil, func(_, hash []byte) (bool, error) {
		var k Key
		ok, err := getJSON(s.st, keyKey(string(hash)), &k)
		if err != nil {
			return false, err
		}
		if ok {
			out = append(out, &k)
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *Key) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// AccountsByEmail returns the accounts recorded with e-mail address email
// (compared without regard to case), in id order, read through the e-mail
// index.
func (s *State) AccountsByEmail(email string) ([]*Account, error) {
	var out []*Account
	if email == "" {
		return nil, nil
	}
	p := prefixEmail(email)
	err := s.st.Scan(p, nil, func(k, _ []byte) (bool, error) {
		a, err := s.Account(string(k[len(p):]))
		if errors.Is(err, ErrNotFound) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		out = append(out, a)
		return true, nil
	})
	return out, err
}

func prefixKeys() []byte { return []byte(store.PrefixLedger + "key/") }

// Accounts calls fn for every account, in id order, until fn returns false.
func (s *State) Accounts(fn func(*Account) (bool, error)) error {
	return s.st.Scan(prefixAccounts(), nil, func(_, v []byte) (bool, error) {
		var a Account
		if err := json.Unmarshal(v, &a); err != nil {
			return false, err
		}
		return fn(&a)
	})
}

// Plans are the monthly credits this replica grants when a month starts
// (set_plans, reset_month); none recorded is an empty table.
func (s *State) Plans() (*Plans, error) {
	p := &Plans{}
	if _, err := getJSON(s.st, keyPlans, p); err != nil {
		return nil, err
	}
	return p, nil
}

// Peers are the voters' addresses as replicated (set_peer), by id.
func (s *State) Peers() ([]Peer, error) {
	var out []Peer
	err := s.st.Scan([]byte(store.PrefixLedger+"peer/"), nil, func(_, v []byte) (bool, error) {
		var p Peer
		if err := json.Unmarshal(v, &p); err != nil {
			return false, err
		}
		out = append(out, p)
		return true, nil
	})
	return out, err
}

// Peer reads a voter's addresses as recorded by a join.
func (s *State) Peer(id string) (*Peer, error) {
	var p Peer
	ok, err := getJSON(s.st, keyPeer(id), &p)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, ErrNotFound
	}
	return &p, nil
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
	snap := s.st.NewSnapshot()
	defer snap.Close()
	return accountBalance(snap, a, now)
}

// A BalanceView is an account, its balance and how far one region's
// journal is settled, all read at one point of the replica: a region's
// unsettled charges (HoldsClient.UnsettledAt) can then be taken from it
// without counting a charge twice (once settled into the balance, once
// still pending in the region) or not at all.
type BalanceView struct {
	Account *Account
	Balance *AccountBalance
	Mark    uint64 // highest journal sequence of (region, epoch) settled
	Index   uint64 // applied index the view was read at
}

// BalanceView reads an account's balance and the settle mark of region's
// journal epoch from one snapshot of the state.
func (s *State) BalanceView(acct string, now time.Time, region, epoch string) (*BalanceView, error) {
	snap := s.st.NewSnapshot()
	defer snap.Close()
	m, err := readMeta(snap)
	if err != nil {
		return nil, err
	}
	var a Account
	ok, err := getJSON(snap, keyAccount(acct), &a)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, ErrNotFound
	}
	ab, err := accountBalance(snap, &a, now)
	if err != nil {
		return nil, err
	}
	v := &BalanceView{Account: &a, Balance: ab, Index: m.AppliedIndex}
	if region != "" && epoch != "" {
		b, err := snap.Get(keyMark(region, epoch))
		switch {
		case err == nil:
			v.Mark = binary.BigEndian.Uint64(b)
		case !errors.Is(err, store.ErrNotFound):
			return nil, err
		}
	}
	return v, nil
}

func accountBalance(r reader, a *Account, now time.Time) (*AccountBalance, error) {
	out := &AccountBalance{Buckets: map[string]MC{}, Holds: map[string]MC{}}
	for _, bk := range SpendOrder {
		v, err := balance(r, BucketAccount(a.ID, bk))
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
	err := r.Scan(prefixHolds(a.ID), nil, func(k, _ []byte) (bool, error) {
		regions = append(regions, string(k[len(prefixHolds(a.ID)):]))
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	for _, region := range regions {
		v, err := balance(r, HoldAccount(a.ID, region))
		if err != nil {
			return nil, err
		}
		out.Holds[region] = v
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
	// AnchoredAt, when not zero, is the entry this audit started after:
	// the replica restored a snapshot without the entries up to it and
	// verified from its anchor (their hash, the balances there). Backfill
	// them, or audit a replica that has them, to verify from the first.
	AnchoredAt uint64 `json:"anchored_at,omitempty"`
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
	a := NewAuditor()
	anchor, err := readAnchor(r)
	if err != nil {
		return nil, err
	}
	if anchor != nil {
		a = NewAuditorAt(anchor)
	}
	err = r.Scan(prefixJournal(), keyJournal(a.n+1), func(k, v []byte) (bool, error) {
		var e Entry
		if err := json.Unmarshal(v, &e); err != nil {
			// A damaged entry is a finding, not a reason to stop reading.
			a.add("entry %d does not decode: %v", journalIndexOf(k), err)
			a.n++
			return true, nil
		}
		a.Add(&e)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	meta, err := readMeta(r)
	if err != nil {
		return nil, err
	}
	stored := map[string]MC{}
	err = r.Scan(prefixBalances(), nil, func(k, v []byte) (bool, error) {
		stored[string(k[len(prefixBalances()):])] = decodeBal(v)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	rep := a.Report(stored)
	if anchor != nil {
		rep.AnchoredAt = anchor.Entries
	}
	if meta.Entries != rep.Entries || (rep.Entries > 0 && meta.LastHash != rep.LastHash) {
		rep.Violations = append(rep.Violations, fmt.Sprintf("meta says %d entries ending %s; journal has %d ending %s", meta.Entries, meta.LastHash, rep.Entries, rep.LastHash))
	}
	return rep, nil
}

// Auditor checks a journal entry by entry, as a replica reads it from its
// store or an auditor reads it from GET /v1/ledger/journal.
type Auditor struct {
	prev       string
	n          uint64
	balances   map[string]MC
	receipts   map[string]uint64
	violations []string
}

// NewAuditor starts at the genesis hash.
func NewAuditor() *Auditor {
	return &Auditor{prev: GenesisHash, balances: map[string]MC{}, receipts: map[string]uint64{}}
}

func (a *Auditor) add(format string, args ...any) {
	if len(a.violations) < 100 {
		a.violations = append(a.violations, fmt.Sprintf(format, args...))
	}
}

// NewAuditorAt starts after an anchor: the entries up to it are taken as
// its hash and balances say (receipts charged before it are not known).
func NewAuditorAt(an *Anchor) *Auditor {
	a := NewAuditor()
	a.prev, a.n = an.LastHash, an.Entries
	for k, v := range an.Balances {
		a.balances[k] = v
	}
	return a
}

// Add checks the next entry: its place in the sequence, its link to the one
// before, its own hash, a positive amount, and that a charge's receipt was not
// charged before.
func (a *Auditor) Add(e *Entry) {
	a.n++
	if e.Index != a.n {
		a.add("entry %d: index %d out of sequence", a.n, e.Index)
	}
	if e.PrevHash != a.prev {
		a.add("entry %d: prev_hash %s does not link to %s", e.Index, e.PrevHash, a.prev)
	}
	if h := e.ComputeHash(); h != e.Hash {
		a.add("entry %d: hash %s, content hashes to %s", e.Index, e.Hash, h)
	}
	if e.Amount <= 0 {
		a.add("entry %d: amount %s is not positive", e.Index, e.Amount)
	}
	if e.Kind == KindCharge {
		if first, dup := a.receipts[e.Receipt]; dup {
			a.add("receipt %s charged twice (entries %d and %d)", e.Receipt, first, e.Index)
		} else {
			a.receipts[e.Receipt] = e.Index
		}
	}
	a.balances[e.Debit] -= e.Amount
	a.balances[e.Credit] += e.Amount
	a.prev = e.Hash
}

// Report finishes the audit. With stored balances (a replica's), each must
// equal what the journal gives; without (a remote journal), the journal's own
// balances are used. Holds must not be negative and all balances must sum to
// zero. StateHash digests the balances and the chain head.
func (a *Auditor) Report(stored map[string]MC) *AuditReport {
	rep := &AuditReport{Entries: a.n, LastHash: a.prev}
	if stored == nil {
		stored = a.balances
	}
	names := map[string]bool{}
	for k := range stored {
		names[k] = true
	}
	for k := range a.balances {
		names[k] = true
	}
	var sum MC
	h := sha256.New()
	for _, name := range slices.Sorted(maps.Keys(names)) {
		got, want := stored[name], a.balances[name]
		if got != want {
			a.add("account %s: stored balance %s, journal gives %s", name, got, want)
		}
		if strings.HasPrefix(name, "hold:") && got < 0 {
			a.add("hold %s is negative (%s): overdraft", name, got)
		}
		sum += got
		if got != 0 {
			fmt.Fprintf(h, "%s=%d\n", name, got)
		}
	}
	if sum != 0 {
		a.add("balances sum to %s, not zero", sum)
	}
	fmt.Fprintf(h, "entries=%d last=%s\n", a.n, a.prev)
	rep.StateHash = hex.EncodeToString(h.Sum(nil))
	rep.Violations = append([]string{}, a.violations...)
	return rep
}
