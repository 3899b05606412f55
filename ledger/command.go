package ledger

import (
	"fmt"
	"time"
)

// Command is one change to the ledger, replicated through Raft. Everything
// Apply needs travels inside it — the time, the ids, the amounts — so every
// replica computes the same state. ID makes it idempotent: a command applied
// once is never applied again, its stored Result is returned instead.
type Command struct {
	ID   string    `json:"id"`
	Type string    `json:"type"`
	Time time.Time `json:"time"`

	CreateAccount *CreateAccount `json:"create_account,omitempty"`
	AddKey        *Key           `json:"add_key,omitempty"`
	RevokeKey     *RevokeKey     `json:"revoke_key,omitempty"`
	Grant         *Grant         `json:"grant,omitempty"`
	Hold          *HoldRequest   `json:"hold,omitempty"`
	Settle        *Settle        `json:"settle,omitempty"`
	Release       *Release       `json:"release,omitempty"`
	Settings      *Settings      `json:"settings,omitempty"`
	ResetMonth    *ResetMonth    `json:"reset_month,omitempty"`
	Topup         *Topup         `json:"topup,omitempty"`
	ExpirePass    *ExpirePass    `json:"expire_pass,omitempty"`
	RechargeDone  *RechargeDone  `json:"recharge_done,omitempty"`
	SetPeer       *Peer          `json:"set_peer,omitempty"`
	SetPlans      *Plans         `json:"set_plans,omitempty"`
	Compact       *Compact       `json:"compact,omitempty"`
	SetCustomer   *SetCustomer   `json:"set_customer,omitempty"`
	MonitorSlot   *MonitorSlot   `json:"monitor_slot,omitempty"`
	SetPrices     *SetPrices     `json:"set_prices,omitempty"`
	SetRecipe     *SetRecipe     `json:"set_recipe,omitempty"`
	DeleteRecipe  *DeleteRecipe  `json:"delete_recipe,omitempty"`
}

// SetCustomer records the account's customer id at the payment provider
// (a checkout created it; saved-card top-ups and auto-recharge charge it).
type SetCustomer struct {
	Account    string `json:"account"`
	CustomerID string `json:"customer_id"`
}

// Command types.
const (
	CmdCreateAccount = "create_account"
	CmdAddKey        = "add_key"
	CmdRevokeKey     = "revoke_key"
	CmdGrant         = "grant"
	CmdHold          = "hold"
	CmdSettle        = "settle"
	CmdRelease       = "release"
	CmdSettings      = "settings"
	CmdResetMonth    = "reset_month"
	CmdTopup         = "topup"
	CmdExpirePass    = "expire_pass"
	CmdRechargeDone  = "recharge_done"
	CmdSetPeer       = "set_peer"
	CmdSetPlans      = "set_plans"
	CmdCompact       = "compact"
	CmdSetCustomer   = "set_customer"
)

type CreateAccount struct {
	Account string `json:"account"`
	Email   string `json:"email,omitempty"`
	Plan    string `json:"plan"`
}

type RevokeKey struct {
	KeyID string `json:"key_id"`
}

// Grant gives free credit into a bucket (sign-up, monthly, pass).
type Grant struct {
	Account string `json:"account"`
	Bucket  string `json:"bucket"`
	Amount  MC     `json:"amount_mc"`
	// PassExpires is required for the pass bucket.
	PassExpires time.Time `json:"pass_expires,omitzero"`
}

// HoldRequest moves up to Want from the account's buckets into the region's
// hold, never more than the balance or the spend cap left.
type HoldRequest struct {
	Account string `json:"account"`
	Region  string `json:"region"`
	Want    MC     `json:"want_mc"`
}

// Settle charges what a region spent from its holds. Each charge is applied
// at most once, however often it is sent.
//
// A holds client sends its journal's Epoch and each charge's Seq: its
// charges are settled in sequence order, so a charge at or below the
// highest sequence already settled for that epoch is a repeat, found by the
// mark alone (no key per charge is kept). Charges without them are checked
// by receipt among the settles without them, for as long as compact keeps
// their receipts: the same charge must not be sent both ways.
type Settle struct {
	Region  string   `json:"region"`
	Epoch   string   `json:"epoch,omitempty"`
	Charges []Charge `json:"charges"`
}

// Charge is one metered call.
type Charge struct {
	Account string    `json:"account"`
	Receipt string    `json:"receipt"`
	Amount  MC        `json:"amount_mc"`
	Time    time.Time `json:"time"`
	Seq     uint64    `json:"seq,omitempty"` // position in the region's journal
}

// Release returns held credit to the account's buckets (Amount 0: all).
type Release struct {
	Account string `json:"account"`
	Region  string `json:"region"`
	Amount  MC     `json:"amount_mc"`
}

// Settings changes the spend cap, auto-recharge and the webhook secret;
// nil fields stay.
type Settings struct {
	Account    string    `json:"account"`
	SpendCapMC *MC       `json:"spend_cap_mc,omitempty"`
	Recharge   *Recharge `json:"recharge,omitempty"`
	// WebhookSecret is the account's new webhook secret, made by the
	// gate (Apply takes no randomness): MinWebhookSecret to
	// MaxWebhookSecret printable ASCII characters. With
	// WebhookSecretIfUnset an account that has one keeps it: two regions
	// that race to make an account's first secret end with one.
	WebhookSecret        *string `json:"webhook_secret,omitempty"`
	WebhookSecretIfUnset bool    `json:"webhook_secret_if_unset,omitempty"`
}

// Bounds of a webhook secret's length.
const (
	MinWebhookSecret = 16
	MaxWebhookSecret = 256
)

// ResetMonth records the plans' monthly credits (as set_plans) and starts
// Month if the ledger is still in an earlier one. The month also turns by
// itself: the first command of any type whose Time falls in a later
// calendar month than the ledger's starts that month before it applies
// (docs/ledger.md); reset_month is kept for compatibility, and a reset of a
// month already started changes nothing but the credits.
type ResetMonth struct {
	Month   string        `json:"month"` // "2026-12"
	Credits map[string]MC `json:"credits"`
}

// Plans are the monthly credit of each plan, granted when a month starts.
// A plan missing here is granted nothing.
type Plans struct {
	Monthly map[string]MC `json:"monthly_mc"`
}

// Compact drops what the ledger keeps only to answer repeats: stored
// command results and receipt records of commands timed before Before
// (docs/ledger.md). Before travels in the command, so every replica drops
// the same keys.
type Compact struct {
	Before time.Time `json:"before"`
}

// Topup credits a paid pack. PaymentID makes it idempotent.
type Topup struct {
	Account   string `json:"account"`
	PaymentID string `json:"payment_id"`
	USD       int    `json:"usd"`
	Credits   MC     `json:"credits_mc"`
	Recharge  bool   `json:"recharge,omitempty"` // an auto-recharge
	// CustomerID, when set, is the provider's customer who paid: stored
	// on the account (as set_customer) with the credit.
	CustomerID string `json:"customer_id,omitempty"`
}

// ExpirePass lapses the pass bucket once its time has come.
type ExpirePass struct {
	Account string `json:"account"`
}

// RechargeDone clears an auto-recharge that was due (paid or not).
type RechargeDone struct {
	Account string `json:"account"`
}

// Result is what Apply returns (and stores under the command's id).
type Result struct {
	Index     uint64 `json:"index"`
	Duplicate bool   `json:"duplicate,omitempty"`
	// Error is a refusal: nothing but the command's result was written.
	Error   string `json:"error,omitempty"`
	Message string `json:"message,omitempty"`

	Granted MC     `json:"granted_mc,omitempty"` // hold: moved into the hold
	Reason  string `json:"reason,omitempty"`     // hold short of Want: no_credit or spend_cap
	// Holds are the hold balances after a hold, settle or release, per
	// account, for the region of the command.
	Holds      map[string]MC `json:"holds,omitempty"`
	Settled    int           `json:"settled,omitempty"`
	Duplicates int           `json:"duplicates,omitempty"`
	// Parked are the charges of a settle the ledger could not take (an
	// unknown account, no receipt): the rest of the batch is settled, these
	// are not charged and the client keeps them for an operator.
	Parked []ParkedCharge `json:"parked,omitempty"`
	// Compacted is how many results and receipts a compact dropped.
	Compacted int `json:"compacted,omitempty"`
	// Reduced are holds a command took credit back from (a lowered spend
	// cap), with their balance after, for the holds clients of their
	// regions.
	Reduced []HoldBalance `json:"reduced,omitempty"`
	// Shortfall is charged credit neither the region's hold nor the
	// account's buckets could cover: it is not charged. The holds client
	// never lets it happen; the client logs it.
	Shortfall MC `json:"shortfall_mc,omitempty"`
}

// HoldBalance is one region's hold of an account.
type HoldBalance struct {
	Account string `json:"account"`
	Region  string `json:"region"`
	Balance MC     `json:"balance_mc"`
}

// ParkedCharge is a charge a settle could not take, and why.
type ParkedCharge struct {
	Charge
	Error   string `json:"error"`
	Message string `json:"message"`
}

// Refusal codes.
const (
	ErrCodeNoAccount = "no_such_account"
	ErrCodeExists    = "exists"
	ErrCodeInvalid   = "invalid"
	ErrCodeNoKey     = "no_such_key"
	ErrCodeKeyLimit  = "key_limit"
)

// Hold shortfall reasons (docs/spec/hosted-api.md §7).
const (
	ReasonNoCredit = "no_credit"
	ReasonSpendCap = "spend_cap"
)

type refusal struct{ code, msg string }

func (r *refusal) Error() string { return r.code + ": " + r.msg }

func refuse(code, format string, args ...any) error {
	return &refusal{code: code, msg: fmt.Sprintf(format, args...)}
}
