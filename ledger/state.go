package ledger

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/trawlhq/trawl/internal/store"
)

// Plans.
const (
	PlanFree      = "free"
	PlanSupporter = "supporter"
)

// Buckets of a customer's credit, in spend order: the monthly credit first,
// then the 7-day pass (it expires soonest), then the sign-up credit, then
// bought packs last (paid for and never expiring). docs/ledger.md.
const (
	BucketMonthly = "monthly"
	BucketPass    = "pass"
	BucketSignup  = "signup"
	BucketPack    = "pack"
)

// SpendOrder is the order buckets are drawn from.
var SpendOrder = []string{BucketMonthly, BucketPass, BucketSignup, BucketPack}

// System ledger accounts. Credit enters through grants and payments, leaves
// through revenue (spent) and expired (lapsed grants). Their balances are the
// negative of what they handed out, so all balances sum to zero.
const (
	SysGrants   = "sys:grants"
	SysPayments = "sys:payments"
	SysRevenue  = "sys:revenue"
	SysExpired  = "sys:expired"
)

// BucketAccount names the ledger account of a customer's bucket.
func BucketAccount(acct, bucket string) string { return "cust:" + acct + ":" + bucket }

// HoldAccount names the ledger account of a customer's hold in a region.
func HoldAccount(acct, region string) string { return "hold:" + acct + ":" + region }

// Account is a customer.
type Account struct {
	ID        string    `json:"id"`
	Email     string    `json:"email,omitempty"`
	Plan      string    `json:"plan"`
	CreatedAt time.Time `json:"created_at"`
	// SpendCapMC is the monthly spend cap; 0 means no cap.
	SpendCapMC MC       `json:"spend_cap_mc"`
	Recharge   Recharge `json:"recharge"`
	// Month is the calendar month ("2026-11") MonthSpent counts.
	Month      string `json:"month"`
	MonthSpent MC     `json:"month_spent_mc"`
	// RechargesThisMonth counts auto-recharges in Month.
	RechargesThisMonth int `json:"recharges_this_month"`
	// RechargeDue is set by a settle that left the balance under the
	// recharge threshold; the leader's billing loop pays and clears it.
	RechargeDue bool `json:"recharge_due,omitempty"`
	// PassExpires is when the 7-day pass bucket lapses (zero: no pass).
	PassExpires time.Time `json:"pass_expires,omitzero"`
	// ProviderCustomerID is the account's customer at the payment
	// provider (Stripe's cus_…), for saved-card top-ups and
	// auto-recharge: set by set_customer or a top-up that names it.
	ProviderCustomerID string `json:"provider_customer_id,omitempty"`
	// WebhookSecret signs the account's Firecrawl webhooks
	// (docs/firecrawl.md, "Webhooks"): made by a gate on first use or on
	// the account's rotation (settings), the same in every region. Shown
	// only to the account's own keys (GET /v1/billing/balance); never in
	// the journal.
	WebhookSecret string `json:"webhook_secret,omitempty"`
}

// Recharge are the auto-recharge settings.
type Recharge struct {
	On           bool `json:"on"`
	UnderCredits MC   `json:"under_credits_mc"`
	PackUSD      int  `json:"pack_usd"`
	MaxPerMonth  int  `json:"max_per_month"`
}

// Key is an API key as stored: never the key itself, only its hash.
type Key struct {
	ID        string    `json:"id"`
	Account   string    `json:"account"`
	Hash      string    `json:"hash"`   // hex SHA-256 of the key
	Prefix    string    `json:"prefix"` // first characters, for display
	Role      string    `json:"role"`   // user, auditor
	Kind      string    `json:"kind"`   // pass (24 h), permanent
	Name      string    `json:"name,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	Revoked   bool      `json:"revoked,omitempty"`
	// MaxActive, in an add_key command, refuses the key (key_limit) when
	// the account already has this many active keys (not revoked, not
	// expired at the command's time); 0 is no limit. It is not stored:
	// the ledger enforces the plan's limit so two gates cannot race past
	// it.
	MaxActive int `json:"max_active,omitempty"`
}

// Roles.
const (
	RoleUser    = "user"
	RoleAuditor = "auditor"
)

// Hold is a customer's credit held by one region; its balance is the hold
// account's balance. Parts remembers which buckets it came from, so spending
// and releasing follow the spend order.
type Hold struct {
	Parts map[string]MC `json:"parts"`
}

// Meta is the FSM's own bookkeeping, written with every apply.
type Meta struct {
	AppliedIndex uint64 `json:"applied_index"`
	Entries      uint64 `json:"entries"`   // journal length
	LastHash     string `json:"last_hash"` // hash of the last journal entry
	// Month is the ledger's calendar month ("2026-11"): taken from the
	// first command's time, turned by the first command of a later month.
	Month string `json:"month"`
}

// Key layout of the ledger's state in its Pebble store (store.PrefixLedger, "L/"):
//
//	L/meta                 Meta
//	L/restoring            present while a snapshot restore is under way
//	L/bal/<ledger account> balance, 8 bytes big-endian two's complement
//	L/acct/<id>            Account
//	L/key/<hash>           Key
//	L/keyid/<id>           hash of the key with that id
//	L/hold/<acct>/<region> Hold
//	L/rcpt/<receipt>       journal index of a charge settled without an epoch
//	L/rcptt/<time><receipt> the same, by the settle's time (compact drops old ones)
//	L/cmd/<id>             Result of an applied command (commands are idempotent)
//	L/cmdt/<time><id>      the same, by the command's time (compact drops old ones)
//	L/pay/<payment id>     journal index of the top-up (a payment credits once)
//	L/peer/<id>            Peer: a voter's addresses (joins)
//	L/plans                Plans: each plan's monthly credit
//	L/mark/<region>/<epoch> highest journal sequence settled from that region's journal
//
// <time> is 8 bytes big-endian Unix nanoseconds (a zero time sorts first).
// A settle from a holds client (epoch and sequences) is deduplicated by its
// mark alone: no key per charge.
//
// Below L/~/ is what each replica keeps for itself, written by the same
// Apply batches but neither in snapshots nor replaced by a restore:
//
//	L/~/j/<index>          journal Entry, index 8 bytes big-endian from 1
//	L/~/anchor             Anchor: where this replica's journal resumes after a restore
//
// The replicated state is what the next command needs: its size follows
// the accounts and the open holds, not the number of charges. The journal
// is the record auditors read; a snapshot carries only its head (Meta's
// Entries and LastHash, the anchor a restored replica resumes from).
var (
	prefixState = []byte(store.PrefixLedger)
	keyMeta     = []byte(store.PrefixLedger + "meta")
	// keyRestoring marks a restore in progress (fsm.Restore).
	keyRestoring = []byte(store.PrefixLedger + "restoring")
)

func keyBal(acct string) []byte       { return []byte(store.PrefixLedger + "bal/" + acct) }
func keyAccount(id string) []byte     { return []byte(store.PrefixLedger + "acct/" + id) }
func keyKey(hash string) []byte       { return []byte(store.PrefixLedger + "key/" + hash) }
func keyKeyID(id string) []byte       { return []byte(store.PrefixLedger + "keyid/" + id) }
func keyHold(acct, reg string) []byte { return []byte(store.PrefixLedger + "hold/" + acct + "/" + reg) }
func keyReceipt(id string) []byte     { return []byte(store.PrefixLedger + "rcpt/" + id) }
func keyCommand(id string) []byte     { return []byte(store.PrefixLedger + "cmd/" + id) }
func keyTimed(prefix string, t time.Time, id string) []byte {
	var ns uint64
	if t.After(time.Unix(0, 0)) {
		ns = uint64(t.UnixNano())
	}
	b := binary.BigEndian.AppendUint64([]byte(prefix), ns)
	return append(b, id...)
}

var (
	prefixCommandTimes = store.PrefixLedger + "cmdt/"
	prefixReceiptTimes = store.PrefixLedger + "rcptt/"
)

func keyPayment(id string) []byte { return []byte(store.PrefixLedger + "pay/" + id) }
func keyPeer(id string) []byte    { return []byte(store.PrefixLedger + "peer/" + id) }

var keyPlans = []byte(store.PrefixLedger + "plans")

func keyMark(region, epoch string) []byte {
	return []byte(store.PrefixLedger + "mark/" + region + "/" + epoch)
}
func keyJournal(index uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte(store.PrefixLedger+"~/j/"), index)
}

// prefixLocal begins the keys a replica keeps for itself; every replicated
// key sorts before it.
var (
	prefixLocal      = []byte(store.PrefixLedger + "~/")
	keyAnchor        = []byte(store.PrefixLedger + "~/anchor")
	prefixOldJournal = []byte(store.PrefixLedger + "j/") // before the journal moved under L/~/
)

// Indexes, written with what they index: an account's keys
// (L/akey/<account>/<key id> → hash) and accounts by e-mail address
// (L/email/<address in lower case>/<account>).
func keyAcctKey(acct, id string) []byte {
	return []byte(store.PrefixLedger + "akey/" + acct + "/" + id)
}
func prefixAcctKeys(acct string) []byte { return []byte(store.PrefixLedger + "akey/" + acct + "/") }
func keyEmail(email, acct string) []byte {
	return []byte(store.PrefixLedger + "email/" + strings.ToLower(email) + "/" + acct)
}
func prefixEmail(email string) []byte {
	return []byte(store.PrefixLedger + "email/" + strings.ToLower(email) + "/")
}

// keyIndexed marks a state whose indexes are built (states written
// before them are indexed once, at open or restore).
var keyIndexed = []byte(store.PrefixLedger + "indexed")

func prefixHolds(acct string) []byte   { return []byte(store.PrefixLedger + "hold/" + acct + "/") }
func prefixJournal() []byte            { return []byte(store.PrefixLedger + "~/j/") }
func prefixAccounts() []byte           { return []byte(store.PrefixLedger + "acct/") }
func prefixBalances() []byte           { return []byte(store.PrefixLedger + "bal/") }
func encodeBal(v MC) []byte            { return binary.BigEndian.AppendUint64(nil, uint64(v)) }
func decodeBal(b []byte) MC            { return MC(binary.BigEndian.Uint64(b)) }
func journalIndexOf(key []byte) uint64 { return binary.BigEndian.Uint64(key[len(key)-8:]) }

// reader is what reads of the state need: the store, a snapshot or an
// indexed batch.
type reader interface {
	Get(key []byte) ([]byte, error)
	Scan(prefix, start []byte, fn func(key, value []byte) (bool, error)) error
}

func getJSON(r reader, key []byte, v any) (bool, error) {
	b, err := r.Get(key)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("decode %s: %w", key, err)
	}
	return true, nil
}

func balance(r reader, acct string) (MC, error) {
	b, err := r.Get(keyBal(acct))
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return decodeBal(b), nil
}

func readMeta(r reader) (Meta, error) {
	var m Meta
	_, err := getJSON(r, keyMeta, &m)
	return m, err
}
