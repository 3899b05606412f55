package payments

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/stripe/stripe-go/v82"
)

// StripeConfig configures the Stripe provider.
type StripeConfig struct {
	// SecretKey is the API key (sk_live_… or sk_test_…). Required.
	SecretKey string
	// BackendURL replaces https://api.stripe.com, e.g. a stripe-mock
	// server in tests. Empty means Stripe itself.
	BackendURL string
	// HTTPClient makes every call; nil means stripe-go's default client
	// (80 s timeout). Contexts passed to the methods cancel calls either way.
	HTTPClient *http.Client
}

// Stripe is the Provider for the hosted service. A charge of a saved card is
// a PaymentIntent confirmed off-session with the customer's default card
// (or, without a default, the card saved last); a checkout is a Checkout
// Session in payment mode that saves the card for later off-session use.
// Idempotency keys are those of the Charge, prefixed per call; Stripe keeps
// them for 24 hours, so later duplicates are the ledger's to refuse (it
// credits each PaymentID once).
type Stripe struct {
	sc *stripe.Client
}

// Metadata keys set on customers, PaymentIntents and Checkout Sessions.
const (
	metaAccount = "account_id"
	metaCredits = "credits"
)

// NewStripe returns the Stripe provider. It makes no calls.
func NewStripe(cfg StripeConfig) (*Stripe, error) {
	if cfg.SecretKey == "" {
		return nil, errors.New("stripe: no secret key")
	}
	bc := &stripe.BackendConfig{
		HTTPClient: cfg.HTTPClient,
		// Errors are returned to the caller; stripe-go would also print them.
		LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
	}
	if cfg.BackendURL != "" {
		bc.URL = stripe.String(strings.TrimRight(cfg.BackendURL, "/"))
	}
	return &Stripe{sc: stripe.NewClient(cfg.SecretKey, stripe.WithBackends(stripe.NewBackendsWithConfig(bc)))}, nil
}

// Name implements Provider.
func (s *Stripe) Name() string { return "stripe" }

// ChargeSaved implements Provider. It reads the customer (and, without a
// default payment method, their newest card), then creates and confirms a
// PaymentIntent off-session. A PaymentIntent that needs the card holder
// (3-D Secure) or another card counts as declined: the buyer repeats with a
// checkout, where they can authenticate.
func (s *Stripe) ChargeSaved(ctx context.Context, c Charge) (*Paid, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	cus := c.Customer.ProviderCustomerID
	if cus == "" {
		return nil, ErrNoSavedCard
	}
	pm, err := s.savedCard(ctx, cus)
	if err != nil {
		return nil, err
	}
	p := &stripe.PaymentIntentCreateParams{
		Amount:             stripe.Int64(int64(c.USD) * 100),
		Currency:           stripe.String(string(stripe.CurrencyUSD)),
		Customer:           stripe.String(cus),
		PaymentMethod:      stripe.String(pm),
		PaymentMethodTypes: []*string{stripe.String("card")},
		Confirm:            stripe.Bool(true),
		OffSession:         stripe.Bool(true),
		Description:        stripe.String(describe(c)),
		Metadata:           metadata(c),
	}
	p.SetIdempotencyKey("trawl-charge-" + c.IdempotencyKey)
	p.AddExpand("latest_charge")
	pi, err := s.sc.V1PaymentIntents.Create(ctx, p)
	if err != nil {
		return nil, stripeErr("charge saved card", err)
	}
	switch pi.Status {
	case stripe.PaymentIntentStatusSucceeded:
	case stripe.PaymentIntentStatusRequiresAction, stripe.PaymentIntentStatusRequiresPaymentMethod:
		msg := "the card needs the card holder"
		if e := pi.LastPaymentError; e != nil && e.Msg != "" {
			msg = e.Msg
		}
		return nil, fmt.Errorf("%w: %s (payment %s is %s)", ErrCardDeclined, msg, pi.ID, pi.Status)
	default:
		// Cards confirmed off-session settle at once; "processing" belongs
		// to bank debits, which are never chosen here.
		return nil, fmt.Errorf("stripe: payment %s is %s, not paid", pi.ID, pi.Status)
	}
	return &Paid{
		PaymentID:          pi.ID,
		InvoiceURL:         receiptURL(pi),
		USD:                int(pi.Amount / 100),
		AccountID:          c.AccountID,
		Credits:            c.Credits,
		ProviderCustomerID: cus,
	}, nil
}

// savedCard returns the payment method to charge: the customer's default
// for invoices, else their newest card.
func (s *Stripe) savedCard(ctx context.Context, customerID string) (string, error) {
	cus, err := s.sc.V1Customers.Retrieve(ctx, customerID, nil)
	if err != nil {
		var se *stripe.Error
		if errors.As(err, &se) && se.Code == stripe.ErrorCodeResourceMissing {
			return "", fmt.Errorf("%w: customer %s is gone", ErrNoSavedCard, customerID)
		}
		return "", stripeErr("read customer", err)
	}
	if cus.Deleted {
		return "", fmt.Errorf("%w: customer %s is deleted", ErrNoSavedCard, customerID)
	}
	if is := cus.InvoiceSettings; is != nil && is.DefaultPaymentMethod != nil && is.DefaultPaymentMethod.ID != "" {
		return is.DefaultPaymentMethod.ID, nil
	}
	lp := &stripe.PaymentMethodListParams{Customer: stripe.String(customerID), Type: stripe.String("card")}
	lp.Limit = stripe.Int64(1)
	for pm, err := range s.sc.V1PaymentMethods.List(ctx, lp) {
		if err != nil {
			return "", stripeErr("list cards", err)
		}
		return pm.ID, nil // newest first
	}
	return "", ErrNoSavedCard
}

// StartCheckout implements Provider. Without a ProviderCustomerID it first
// creates the customer, so the card paid with is saved for ChargeSaved.
func (s *Stripe) StartCheckout(ctx context.Context, c Charge, successURL, cancelURL string) (*Checkout, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	cus := c.Customer.ProviderCustomerID
	if cus == "" {
		cp := &stripe.CustomerCreateParams{Metadata: map[string]string{metaAccount: c.AccountID}}
		if c.Customer.Email != "" {
			cp.Email = stripe.String(c.Customer.Email)
		}
		cp.SetIdempotencyKey("trawl-customer-" + c.IdempotencyKey)
		created, err := s.sc.V1Customers.Create(ctx, cp)
		if err != nil {
			return nil, stripeErr("create customer", err)
		}
		cus = created.ID
	}
	p := &stripe.CheckoutSessionCreateParams{
		Mode:              stripe.String(string(stripe.CheckoutSessionModePayment)),
		Customer:          stripe.String(cus),
		ClientReferenceID: stripe.String(c.AccountID),
		SuccessURL:        stripe.String(successURL),
		CancelURL:         stripe.String(cancelURL),
		LineItems: []*stripe.CheckoutSessionCreateLineItemParams{{
			Quantity: stripe.Int64(1),
			PriceData: &stripe.CheckoutSessionCreateLineItemPriceDataParams{
				Currency:   stripe.String(string(stripe.CurrencyUSD)),
				UnitAmount: stripe.Int64(int64(c.USD) * 100),
				ProductData: &stripe.CheckoutSessionCreateLineItemPriceDataProductDataParams{
					Name: stripe.String(describe(c)),
				},
			},
		}},
		Metadata: metadata(c),
		PaymentIntentData: &stripe.CheckoutSessionCreatePaymentIntentDataParams{
			SetupFutureUsage: stripe.String(string(stripe.PaymentIntentSetupFutureUsageOffSession)),
			Description:      stripe.String(describe(c)),
			Metadata:         metadata(c),
		},
	}
	p.SetIdempotencyKey("trawl-checkout-" + c.IdempotencyKey)
	cs, err := s.sc.V1CheckoutSessions.Create(ctx, p)
	if err != nil {
		return nil, stripeErr("create checkout session", err)
	}
	return &Checkout{SessionID: cs.ID, URL: cs.URL, ProviderCustomerID: cus}, nil
}

// CompleteCheckout implements Provider. It reads the session from Stripe,
// so a webhook's body need not be trusted for more than the session id.
func (s *Stripe) CompleteCheckout(ctx context.Context, sessionID string) (*Paid, bool, error) {
	if sessionID == "" {
		return nil, false, ErrNoSession
	}
	p := &stripe.CheckoutSessionRetrieveParams{}
	p.AddExpand("payment_intent.latest_charge")
	cs, err := s.sc.V1CheckoutSessions.Retrieve(ctx, sessionID, p)
	if err != nil {
		var se *stripe.Error
		if errors.As(err, &se) && se.Code == stripe.ErrorCodeResourceMissing {
			return nil, false, fmt.Errorf("%w: %s", ErrNoSession, sessionID)
		}
		return nil, false, stripeErr("read checkout session", err)
	}
	if cs.PaymentStatus != stripe.CheckoutSessionPaymentStatusPaid || cs.PaymentIntent == nil {
		return nil, false, nil
	}
	credits, err := strconv.ParseInt(cs.Metadata[metaCredits], 10, 64)
	if err != nil || cs.Metadata[metaAccount] == "" {
		return nil, false, fmt.Errorf("stripe: checkout session %s has no trawl metadata", cs.ID)
	}
	paid := &Paid{
		PaymentID:  cs.PaymentIntent.ID,
		InvoiceURL: receiptURL(cs.PaymentIntent),
		USD:        int(cs.AmountTotal / 100),
		AccountID:  cs.Metadata[metaAccount],
		Credits:    credits,
	}
	if cs.Customer != nil {
		paid.ProviderCustomerID = cs.Customer.ID
	}
	return paid, true, nil
}

func describe(c Charge) string {
	return fmt.Sprintf("trawl credits: %s", formatCredits(c.Credits))
}

func metadata(c Charge) map[string]string {
	return map[string]string{metaAccount: c.AccountID, metaCredits: strconv.FormatInt(c.Credits, 10)}
}

func receiptURL(pi *stripe.PaymentIntent) string {
	if pi.LatestCharge == nil {
		return ""
	}
	return pi.LatestCharge.ReceiptURL
}

// stripeErr maps Stripe's errors to the package's sentinels and keeps the
// rest readable (stripe.Error prints as JSON).
func stripeErr(op string, err error) error {
	var se *stripe.Error
	if !errors.As(err, &se) {
		return fmt.Errorf("stripe: %s: %w", op, err)
	}
	switch se.Type {
	case stripe.ErrorTypeCard:
		code := string(se.Code)
		if se.DeclineCode != "" {
			code += "/" + string(se.DeclineCode)
		}
		return fmt.Errorf("%w: %s (%s)", ErrCardDeclined, se.Msg, code)
	case stripe.ErrorTypeIdempotency:
		return fmt.Errorf("%w: %s", ErrKeyReused, se.Msg)
	}
	msg := fmt.Sprintf("stripe: %s: %s %d", op, se.Type, se.HTTPStatusCode)
	if se.Code != "" {
		msg += " " + string(se.Code)
	}
	msg += ": " + se.Msg
	if se.RequestID != "" {
		msg += " (request " + se.RequestID + ")"
	}
	return errors.New(msg)
}

var _ Provider = (*Stripe)(nil)
