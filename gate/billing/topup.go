package billing

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/trawlhq/trawl/gate/payments"
	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/ledger"
)

// Topup is the body of a paid top-up (saved card, or a completed checkout).
type Topup struct {
	Paid       bool     `json:"paid"`
	USD        int      `json:"usd"`
	Credits    string   `json:"credits"`
	InvoiceURL string   `json:"invoice_url"`
	PaymentID  string   `json:"payment_id"`
	Balance    *Balance `json:"balance,omitempty"`
}

// CheckoutStarted is the body of a top-up with checkout=1.
type CheckoutStarted struct {
	CheckoutURL string `json:"checkout_url"`
	SessionID   string `json:"session_id"`
	USD         int    `json:"usd"`
	Credits     string `json:"credits"`
	// Complete is the route that credits the session once it is paid (it
	// is also credited by the checkout itself).
	Complete string `json:"complete"`
}

// CheckoutPending is the body of a completion call for a session not yet
// paid.
type CheckoutPending struct {
	Paid      bool   `json:"paid"` // false
	SessionID string `json:"session_id"`
	Message   string `json:"message"`
}

// The Idempotency-Key header: printable ASCII without spaces.
var idemKeyRE = regexp.MustCompile(`^[\x21-\x7e]{1,100}$`)

// amount=USD: whole dollars, "10" or "10.00".
var usdRE = regexp.MustCompile(`^([0-9]{1,6})(\.0{1,2})?$`)

// POST /v1/billing/topup?amount=USD[&checkout=1]
func (h *handler) topup(w http.ResponseWriter, r *http.Request, _ *ledger.Key, a *ledger.Account) {
	q := r.URL.Query()
	for name, vals := range q {
		if (name != "amount" && name != "checkout") || len(vals) != 1 {
			httpjson.Error(w, http.StatusBadRequest, CodeBadInput, "the parameters are amount and checkout, each once")
			return
		}
	}
	m := usdRE.FindStringSubmatch(q.Get("amount"))
	usd := 0
	if m != nil {
		usd, _ = strconv.Atoi(m[1])
	}
	pack, ok := h.cfg.CurrentPrices().Pack(usd)
	if m == nil || !ok {
		httpjson.Error(w, http.StatusBadRequest, CodeBadInput, "amount must be one of the packs, in US dollars: "+h.cfg.CurrentPrices().PackList())
		return
	}
	var checkout bool
	switch q.Get("checkout") {
	case "", "0", "false":
	case "1", "true":
		checkout = true
	default:
		httpjson.Error(w, http.StatusBadRequest, CodeBadInput, "checkout must be 1 or 0")
		return
	}
	clientKey := r.Header.Get("Idempotency-Key")
	if clientKey == "" {
		clientKey = rand.Text()
	} else if !idemKeyRE.MatchString(clientKey) {
		httpjson.Error(w, http.StatusBadRequest, CodeBadInput, "Idempotency-Key must be 1 to 100 printable ASCII characters without spaces")
		return
	}
	// Echoed so a client that sent none can still retry safely.
	w.Header().Set("Idempotency-Key", clientKey)
	if h.cfg.Provider == nil {
		httpjson.Error(w, http.StatusServiceUnavailable, CodePaymentsOff, "this server takes no payments")
		return
	}
	kind := "topup"
	if checkout {
		kind = "checkout"
	}
	charge := payments.Charge{
		AccountID:      a.ID,
		USD:            pack.USD,
		Credits:        int64(pack.Credits),
		IdempotencyKey: providerKey(kind, a.ID, strconv.Itoa(pack.USD), clientKey),
		Customer:       payments.Customer{AccountID: a.ID, Email: a.Email, ProviderCustomerID: a.ProviderCustomerID},
	}
	if checkout {
		h.startCheckout(w, r, charge)
		return
	}
	paid, err := h.cfg.Provider.ChargeSaved(r.Context(), charge)
	switch {
	case errors.Is(err, payments.ErrCardDeclined):
		httpjson.Write(w, http.StatusPaymentRequired, topupRefused(CodeCardDeclined, "Your saved card did not pay ("+providerMessage(err)+").", pack.USD))
		return
	case errors.Is(err, payments.ErrNoSavedCard):
		httpjson.Write(w, http.StatusPaymentRequired, topupRefused(CodeNoSavedCard, "There is no saved card to charge.", pack.USD))
		return
	case err != nil:
		h.paymentError(w, "charge saved card", err)
		return
	}
	h.creditAndAnswer(w, r, a.ID, paid)
}

// providerMessage is the provider's text after the sentinel, meant for the
// card holder.
func providerMessage(err error) string {
	s := err.Error()
	if i := strings.Index(s, payments.ErrCardDeclined.Error()+": "); i >= 0 {
		return s[i+len(payments.ErrCardDeclined.Error())+2:]
	}
	return "declined"
}

// providerKey scopes a client's idempotency key to the account, the kind of
// payment and the pack: the same key for another account or amount is
// another purchase (Stripe's keys are global, not per customer). Too long a
// key is hashed.
func providerKey(kind, acct, usd, clientKey string) string {
	k := kind + "/" + acct + "/" + usd + "/" + clientKey
	if len(k) <= payments.MaxKeyLen {
		return k
	}
	sum := sha256.Sum256([]byte(acct + "\x00" + usd + "\x00" + clientKey))
	return kind + "/h/" + hex.EncodeToString(sum[:])
}

func (h *handler) paymentError(w http.ResponseWriter, what string, err error) {
	if errors.Is(err, payments.ErrKeyReused) {
		httpjson.Error(w, http.StatusConflict, CodeConflict, "this Idempotency-Key was used for another payment; use a new key")
		return
	}
	h.cfg.Logger.Error("billing: "+what, "err", err)
	httpjson.Error(w, http.StatusBadGateway, CodePaymentFailed, "the payment provider did not complete the request; nothing was charged, try again")
}

func (h *handler) startCheckout(w http.ResponseWriter, r *http.Request, c payments.Charge) {
	success := h.cfg.PublicURL + payments.CheckoutPath + "{CHECKOUT_SESSION_ID}/complete"
	cancel := ""
	if h.cfg.PublicURL != "" {
		cancel = h.cfg.PublicURL + "/v1/prices"
	}
	co, err := h.cfg.Provider.StartCheckout(r.Context(), c, success, cancel)
	if err != nil {
		h.paymentError(w, "start checkout", err)
		return
	}
	// The provider made a customer for this account: keep it, so the card
	// saved by this checkout pays later top-ups and auto-recharges. The
	// completed payment names the customer again; failing here only
	// delays that.
	if co.ProviderCustomerID != "" && co.ProviderCustomerID != c.Customer.ProviderCustomerID {
		if err := setCustomer(r.Context(), h.cfg, c.AccountID, co.ProviderCustomerID); err != nil {
			h.cfg.Logger.Warn("billing: keep the provider's customer", "account", c.AccountID, "customer", co.ProviderCustomerID, "err", err)
		}
	}
	httpjson.Write(w, http.StatusOK, CheckoutStarted{
		CheckoutURL: co.URL,
		SessionID:   co.SessionID,
		USD:         c.USD,
		Credits:     ledger.MC(c.Credits).String(),
		Complete:    "POST " + payments.CheckoutPath + co.SessionID + "/complete",
	})
}

// creditAndAnswer credits a payment and answers with the paid body.
func (h *handler) creditAndAnswer(w http.ResponseWriter, r *http.Request, acct string, paid *payments.Paid) {
	if err := credit(r.Context(), h.cfg, paid, false); err != nil {
		// The money is taken: say so, and how to finish without paying
		// twice. The payment id credits once however often it is sent.
		h.cfg.Logger.Error("billing: paid but not credited", "account", paid.AccountID, "payment", paid.PaymentID, "err", err)
		httpjson.Error(w, http.StatusServiceUnavailable, CodeLedger, fmt.Sprintf(
			"payment %s went through but the ledger did not answer; repeat the request with the same Idempotency-Key to credit it (you will not be charged twice)", paid.PaymentID))
		return
	}
	body := topupBody(paid)
	a, err := h.cfg.State.Account(acct)
	if err == nil {
		body.Balance, err = h.balanceOf(a)
	}
	if err != nil {
		h.internal(w, "balance after top-up", err)
		return
	}
	httpjson.Write(w, http.StatusOK, body)
}

func topupBody(p *payments.Paid) *Topup {
	return &Topup{Paid: true, USD: p.USD, Credits: ledger.MC(p.Credits).String(), InvoiceURL: p.InvoiceURL, PaymentID: p.PaymentID}
}

// credit submits the Topup of a payment. Its command id is the payment's,
// and the ledger credits a payment id once, so sending it again (a retry, a
// webhook and a return page racing) credits nothing more. A lost answer is
// retried here a few times before giving up.
func credit(ctx context.Context, cfg Config, p *payments.Paid, recharge bool) error {
	if p.PaymentID == "" || p.AccountID == "" || p.Credits <= 0 {
		return fmt.Errorf("payment %q of account %q for %d mc cannot be credited", p.PaymentID, p.AccountID, p.Credits)
	}
	cmd := &ledger.Command{
		ID: "topup/" + p.PaymentID, Type: ledger.CmdTopup, Time: cfg.Now(),
		Topup: &ledger.Topup{Account: p.AccountID, PaymentID: p.PaymentID, USD: p.USD, Credits: ledger.MC(p.Credits), Recharge: recharge,
			CustomerID: p.ProviderCustomerID},
	}
	var err error
	for attempt, wait := 0, 50*time.Millisecond; attempt < 3; attempt, wait = attempt+1, wait*4 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return errors.Join(err, ctx.Err())
			case <-time.After(wait):
			}
		}
		var res *ledger.Result
		res, err = submit(ctx, cfg, cmd)
		if err != nil {
			continue
		}
		if res.Error != "" {
			return fmt.Errorf("topup refused: %s: %s", res.Error, res.Message)
		}
		return nil
	}
	return err
}

// setCustomer records the account's customer at the payment provider.
func setCustomer(ctx context.Context, cfg Config, acct, customer string) error {
	res, err := submit(ctx, cfg, &ledger.Command{
		ID: fmt.Sprintf("customer/%s/%s/%d", acct, customer, cfg.Now().UnixNano()), Type: ledger.CmdSetCustomer, Time: cfg.Now(),
		SetCustomer: &ledger.SetCustomer{Account: acct, CustomerID: customer},
	})
	if err != nil {
		return err
	}
	if res.Error != "" {
		return fmt.Errorf("set_customer refused: %s: %s", res.Error, res.Message)
	}
	return nil
}

// CompleteCheckout credits a checkout session once it is paid, and returns
// the payment and true; nil and false while it is open;
// payments.ErrNoSession for an unknown id. It is safe to call any number of
// times from anywhere (the gate's Stripe webhook, the return page, the
// client): the payment credits the account it names, once.
func CompleteCheckout(ctx context.Context, cfg Config, sessionID string) (*payments.Paid, bool, error) {
	cfg = cfg.withDefaults()
	if cfg.Provider == nil {
		return nil, false, errors.New("billing: no payment provider")
	}
	paid, ok, err := cfg.Provider.CompleteCheckout(ctx, sessionID)
	if err != nil || !ok {
		return nil, false, err
	}
	if err := credit(ctx, cfg, paid, false); err != nil {
		return paid, false, fmt.Errorf("credit payment %s: %w", paid.PaymentID, err)
	}
	return paid, true, nil
}

var sessionRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,200}$`)

// POST /v1/billing/checkout/{session}/complete (with a key). The route is
// public, as the GET of its path must be (a browser returning from the
// payment page has no key), so no module authenticated it: the handler
// checks the key itself (keyed).
func (h *handler) complete(w http.ResponseWriter, r *http.Request, _ *ledger.Key, a *ledger.Account) {
	paid, ok := h.completeCommon(w, r)
	if !ok {
		return
	}
	if paid.AccountID != a.ID {
		httpjson.Error(w, http.StatusNotFound, CodeNotFound, "no such checkout on this account")
		return
	}
	body := topupBody(paid)
	b, err := h.balanceOf(a)
	if err != nil {
		h.internal(w, "balance after checkout", err)
		return
	}
	body.Balance = b
	httpjson.Write(w, http.StatusOK, body)
}

// GET /v1/billing/checkout/{session}/complete: where the payment page
// returns the buyer's browser. No key (a browser has none): it credits what
// the provider says was paid to the account the payment names, and shows
// no balance.
func (h *handler) completeReturn(w http.ResponseWriter, r *http.Request) {
	paid, ok := h.completeCommon(w, r)
	if !ok {
		return
	}
	httpjson.Write(w, http.StatusOK, topupBody(paid))
}

// completeCommon runs CompleteCheckout for the path's session and answers
// every outcome but a credited payment.
func (h *handler) completeCommon(w http.ResponseWriter, r *http.Request) (*payments.Paid, bool) {
	id := r.PathValue("session")
	if !sessionRE.MatchString(id) {
		httpjson.Error(w, http.StatusNotFound, CodeNotFound, "no such checkout")
		return nil, false
	}
	if h.cfg.Provider == nil {
		httpjson.Error(w, http.StatusServiceUnavailable, CodePaymentsOff, "this server takes no payments")
		return nil, false
	}
	paid, ok, err := CompleteCheckout(r.Context(), h.cfg, id)
	switch {
	case errors.Is(err, payments.ErrNoSession):
		httpjson.Error(w, http.StatusNotFound, CodeNotFound, "no such checkout")
		return nil, false
	case err != nil && paid != nil:
		h.cfg.Logger.Error("billing: checkout paid but not credited", "session", id, "payment", paid.PaymentID, "err", err)
		httpjson.Error(w, http.StatusServiceUnavailable, CodeLedger, "the checkout is paid but the ledger did not answer; repeat this call to credit it")
		return nil, false
	case err != nil:
		h.paymentError(w, "complete checkout", err)
		return nil, false
	case !ok:
		httpjson.Write(w, http.StatusOK, CheckoutPending{SessionID: id, Message: "the checkout is not paid yet; call again once it is"})
		return nil, false
	}
	return paid, true
}

// checkoutPages serves the provider's checkout pages on the route table's
// prefix row payments.CheckoutPath: GET and POST of
// /v1/billing/checkout/{session}, where a confirmed page is credited at
// once, whether or not the browser follows the redirect to the return
// page. Any other path below the prefix is 404.
func (h *handler) checkoutPages(pages http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := strings.TrimPrefix(r.URL.Path, payments.CheckoutPath)
		if id == "" || strings.Contains(id, "/") {
			h.notFound(w, r)
			return
		}
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			pages.ServeHTTP(w, r)
		case http.MethodPost:
			pages.ServeHTTP(w, r)
			h.creditConfirmed(r.Context(), id)
		default:
			w.Header().Set("Allow", "GET, POST")
			httpjson.Error(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed, r.Method+" is not allowed on "+r.URL.Path+"; use GET, POST")
		}
	})
}

// creditConfirmed credits the session the page may just have confirmed.
func (h *handler) creditConfirmed(ctx context.Context, id string) {
	if !sessionRE.MatchString(id) {
		return
	}
	paid, ok, err := CompleteCheckout(ctx, h.cfg, id)
	switch {
	case err != nil && !errors.Is(err, payments.ErrNoSession):
		h.cfg.Logger.Error("billing: credit confirmed checkout", "session", id, "err", err)
	case ok:
		h.cfg.Logger.Info("billing: checkout credited", "session", id, "account", paid.AccountID, "payment", paid.PaymentID, "usd", paid.USD)
	}
}
