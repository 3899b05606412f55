// Package payments takes money for credit top-ups (POST /v1/billing/topup,
// docs/spec/hosted-api.md §2.10 and §7). A Provider charges a customer's saved card at once, or
// opens a hosted checkout that is paid later; the ledger turns a payment
// into credits, once per payment id.
//
// Two providers: Stripe, for the hosted service, and Local, the embedded
// default for self-hosting and development, where an operator confirms each
// checkout on a small HTML page. Neither knows the price table: the caller
// decides how many credits a pack buys and passes both numbers in a Charge.
package payments

import (
	"context"
	"errors"
	"fmt"
)

// Errors callers test with errors.Is.
var (
	// ErrCardDeclined means a saved card did not pay: the API answers 402
	// (docs/spec/hosted-api.md §7: repeat with checkout=1 or update the card). The text after
	// the sentinel is the provider's message, written to be shown to the
	// card holder.
	ErrCardDeclined = errors.New("card declined")
	// ErrNoSavedCard means there is no card to charge off-session: the
	// customer was never created, or has no card on file. The caller offers
	// a checkout instead.
	ErrNoSavedCard = errors.New("no saved card")
	// ErrNoSession means no checkout session has that id.
	ErrNoSession = errors.New("no such checkout session")
	// ErrKeyReused means an idempotency key came back with a different
	// charge (another amount or account): nothing was charged.
	ErrKeyReused = errors.New("idempotency key reused with a different charge")
	// ErrInvalidCharge means a Charge is missing a field or has a
	// non-positive amount; it is a bug in the caller.
	ErrInvalidCharge = errors.New("invalid charge")
)

// Customer is the account's identity at the payment provider.
type Customer struct {
	AccountID string
	// Email goes to the provider for receipts; it may be empty.
	Email string
	// ProviderCustomerID is the provider's id for this account, empty until
	// a Checkout or Paid returns one; the caller stores it on the account.
	ProviderCustomerID string
}

// Charge is one purchase of a credit pack.
type Charge struct {
	AccountID string
	// USD is the price in whole dollars, one of the packs.
	USD int
	// Credits is the number of millicredits the pack buys; it is recorded
	// with the payment (metadata, descriptions) and returned in Paid.
	Credits int64
	// IdempotencyKey identifies this purchase: calls with the same account
	// and key never pay twice, so a retry after a lost answer is safe. The
	// caller makes one key per top-up attempt, at most MaxKeyLen bytes.
	IdempotencyKey string
	Customer       Customer
}

// MaxKeyLen is the longest IdempotencyKey accepted (Stripe allows 255
// characters, and the provider adds a prefix).
const MaxKeyLen = 200

// Paid describes a completed payment.
type Paid struct {
	// PaymentID is the provider's id of the payment. The same purchase
	// always reports the same id: the ledger credits each id once.
	PaymentID string
	// InvoiceURL is a page showing the payment (a receipt); may be empty.
	InvoiceURL string
	USD        int
	// AccountID and Credits are those of the Charge that started the
	// payment (for a checkout, as recorded when it was started).
	AccountID string
	Credits   int64
	// ProviderCustomerID is the customer who paid; may be empty (Local).
	ProviderCustomerID string
}

// Checkout is a started hosted checkout.
type Checkout struct {
	SessionID string
	// URL is where the buyer pays.
	URL string
	// ProviderCustomerID is the customer the checkout belongs to (created
	// if the Charge had none); may be empty (Local).
	ProviderCustomerID string
}

// Provider takes payments for top-ups. Implementations are safe for
// concurrent use.
type Provider interface {
	// ChargeSaved charges the customer's saved card off-session and returns
	// once the money is taken. It returns ErrNoSavedCard when there is no
	// card to charge and ErrCardDeclined when the card did not pay; on any
	// error nothing was paid. Repeating the call with the same account and
	// IdempotencyKey returns the same payment.
	ChargeSaved(ctx context.Context, c Charge) (*Paid, error)
	// StartCheckout opens a hosted checkout for the pack and returns where
	// to pay; the payment completes later (see CompleteCheckout). The same
	// account and IdempotencyKey return the same session. successURL may
	// contain {CHECKOUT_SESSION_ID}, replaced by the session id.
	StartCheckout(ctx context.Context, c Charge, successURL, cancelURL string) (*Checkout, error)
	// CompleteCheckout asks the provider whether a session was paid: it
	// returns the payment and true once it was, nil and false while it is
	// open, and ErrNoSession for an unknown id. It changes nothing, so the
	// webhook and the success page may both call it.
	CompleteCheckout(ctx context.Context, sessionID string) (*Paid, bool, error)
	// Name is "stripe" or "local".
	Name() string
}

func (c Charge) validate() error {
	switch {
	case c.AccountID == "":
		return fmt.Errorf("%w: no account", ErrInvalidCharge)
	case c.USD <= 0:
		return fmt.Errorf("%w: usd %d", ErrInvalidCharge, c.USD)
	case c.Credits <= 0:
		return fmt.Errorf("%w: credits %d", ErrInvalidCharge, c.Credits)
	case c.IdempotencyKey == "":
		return fmt.Errorf("%w: no idempotency key", ErrInvalidCharge)
	case len(c.IdempotencyKey) > MaxKeyLen:
		return fmt.Errorf("%w: idempotency key longer than %d bytes", ErrInvalidCharge, MaxKeyLen)
	case c.Customer.AccountID != "" && c.Customer.AccountID != c.AccountID:
		return fmt.Errorf("%w: customer of account %q", ErrInvalidCharge, c.Customer.AccountID)
	}
	return nil
}

// formatCredits writes millicredits as a decimal with three places, as the
// receipt headers do (docs/spec/hosted-api.md §2.10).
func formatCredits(mc int64) string {
	sign := ""
	if mc < 0 {
		sign, mc = "-", -mc
	}
	return fmt.Sprintf("%s%d.%03d", sign, mc/1000, mc%1000)
}
