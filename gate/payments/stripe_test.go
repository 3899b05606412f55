package payments

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/trawlhq/trawl/gate/payments/stripemock"
)

// Ids in stripe-mock's fixtures (also in stripemock/paid.json).
// Objects created through stripe-mock get fresh random ids instead.
const (
	fixtureCustomer = "cus_QXg1o8vcGmoR32"
	fixturePM       = "pm_1Pgc75B7WZ01zgkWlHVgdEGJ"
	fixturePI       = "pi_1PgafyB7WZ01zgkWSjxsAJo3"
	fixtureSession  = "cs_test_a1YS1URlnyQCN5fUUduORoQ7Pw41PJqDWkIVQCpJPqkfIhd6tVY8XB1OLY"
	fixtureReceipt  = "https://pay.stripe.com/receipts/payment/fixture-paid"
)

func testCharge() Charge {
	return Charge{
		AccountID:      "acct_1",
		USD:            10,
		Credits:        10_000_000,
		IdempotencyKey: "topup-1",
		Customer:       Customer{AccountID: "acct_1", Email: "buyer@example.com", ProviderCustomerID: "cus_1"},
	}
}

// createdID checks that id looks like a Stripe id with that prefix and
// returns prefix+"*" for comparisons.
func createdID(t *testing.T, id, prefix string) string {
	t.Helper()
	if !strings.HasPrefix(id, prefix) || len(id) < len(prefix)+8 {
		t.Errorf("id %q, want %s…", id, prefix)
	}
	return prefix + "*"
}

func newTestStripe(t *testing.T, backend string) *Stripe {
	t.Helper()
	s, err := NewStripe(StripeConfig{SecretKey: "sk_test_123", BackendURL: backend})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkRequests compares the method and path of each request, requires
// that stripe-mock accepted every one (it validates parameters against
// Stripe's OpenAPI spec), and checks the wanted form values and keys.
func checkRequests(t *testing.T, got []recorded, want []wantRequest) {
	t.Helper()
	if len(got) != len(want) {
		var paths []string
		for _, r := range got {
			paths = append(paths, r.Method+" "+r.Path)
		}
		t.Fatalf("requests %q, want %d", paths, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Method+" "+g.Path != w.route {
			t.Errorf("request %d: %s %s, want %s", i, g.Method, g.Path, w.route)
		}
		if g.Status != http.StatusOK {
			t.Errorf("request %d %s: stripe answered %d", i, w.route, g.Status)
		}
		if g.IdempotencyKey != w.key {
			t.Errorf("request %d %s: Idempotency-Key %q, want %q", i, w.route, g.IdempotencyKey, w.key)
		}
		for k, v := range w.form {
			if g.Form.Get(k) != v {
				t.Errorf("request %d %s: %s=%q, want %q", i, w.route, k, g.Form.Get(k), v)
			}
		}
	}
}

type wantRequest struct {
	route string
	key   string
	form  map[string]string
}

var wantPaymentIntent = map[string]string{
	"amount":                  "1000",
	"currency":                "usd",
	"customer":                "cus_1",
	"confirm":                 "true",
	"off_session":             "true",
	"payment_method":          fixturePM,
	"payment_method_types[0]": "card",
	"metadata[account_id]":    "acct_1",
	"metadata[credits]":       "10000000",
	"description":             "trawl credits: 10000.000",
	"expand[0]":               "latest_charge",
}

func TestStripeChargeSaved(t *testing.T) {
	noCustomer := testCharge()
	noCustomer.Customer.ProviderCustomerID = ""
	noKey := testCharge()
	noKey.IdempotencyKey = ""
	tests := []struct {
		name    string
		mock    string
		charge  Charge
		want    *Paid
		wantErr error
		reqs    []wantRequest
	}{{
		name:   "default card, payment succeeds",
		mock:   "paid",
		charge: testCharge(),
		want: &Paid{PaymentID: "pi_*", InvoiceURL: fixtureReceipt, USD: 10,
			AccountID: "acct_1", Credits: 10_000_000, ProviderCustomerID: "cus_1"},
		reqs: []wantRequest{
			{route: "GET /v1/customers/cus_1"},
			{route: "POST /v1/payment_intents", key: "trawl-charge-topup-1", form: wantPaymentIntent},
		},
	}, {
		// stripe-mock's PaymentIntent "requires_payment_method": what Stripe
		// answers when a card fails off-session.
		name:    "no default card, newest card charged, not paid",
		mock:    "canned",
		charge:  testCharge(),
		wantErr: ErrCardDeclined,
		reqs: []wantRequest{
			{route: "GET /v1/customers/cus_1"},
			{route: "GET /v1/payment_methods", form: map[string]string{"customer": "cus_1", "type": "card", "limit": "1"}},
			{route: "POST /v1/payment_intents", key: "trawl-charge-topup-1", form: wantPaymentIntent},
		},
	}, {
		name:    "no customer yet",
		mock:    "canned",
		charge:  noCustomer,
		wantErr: ErrNoSavedCard,
	}, {
		name:    "no idempotency key",
		mock:    "canned",
		charge:  noKey,
		wantErr: ErrInvalidCharge,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder(t, stripemock.URL(t, tt.mock))
			got, err := newTestStripe(t, rec.srv.URL).ChargeSaved(context.Background(), tt.charge)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if got != nil {
				got.PaymentID = createdID(t, got.PaymentID, "pi_")
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("paid %+v, want %+v", got, tt.want)
			}
			checkRequests(t, rec.requests(), tt.reqs)
		})
	}
}

// A retry after a lost answer sends the same Idempotency-Key, so Stripe
// replays the first PaymentIntent instead of charging again. (stripe-mock
// does not replay: it answers each call with a new id, so only the keys
// sent can be checked here.)
func TestStripeChargeRetrySendsSameKey(t *testing.T) {
	rec := newRecorder(t, stripemock.URL(t, "paid"))
	s := newTestStripe(t, rec.srv.URL)
	for range 2 {
		if _, err := s.ChargeSaved(context.Background(), testCharge()); err != nil {
			t.Fatal(err)
		}
	}
	var keys []string
	for _, r := range rec.requests() {
		if r.Method == "POST" {
			keys = append(keys, r.IdempotencyKey)
		}
	}
	if want := []string{"trawl-charge-topup-1", "trawl-charge-topup-1"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("keys %q, want %q", keys, want)
	}
}

func TestStripeStartCheckout(t *testing.T) {
	const success, cancel = "https://trawl.test/billing/done?session={CHECKOUT_SESSION_ID}", "https://trawl.test/billing"
	session := func(customer string) map[string]string {
		return map[string]string{
			"mode":                                   "payment",
			"customer":                               customer,
			"client_reference_id":                    "acct_1",
			"success_url":                            success,
			"cancel_url":                             cancel,
			"line_items[0][quantity]":                "1",
			"line_items[0][price_data][currency]":    "usd",
			"line_items[0][price_data][unit_amount]": "1000",
			"line_items[0][price_data][product_data][name]": "trawl credits: 10000.000",
			"metadata[account_id]":                          "acct_1",
			"metadata[credits]":                             "10000000",
			"payment_intent_data[setup_future_usage]":       "off_session",
			"payment_intent_data[metadata][account_id]":     "acct_1",
			"payment_intent_data[metadata][credits]":        "10000000",
		}
	}
	newCustomer := testCharge()
	newCustomer.Customer.ProviderCustomerID = ""
	tests := []struct {
		name   string
		charge Charge
		want   *Checkout
		reqs   []wantRequest
	}{{
		name:   "existing customer",
		charge: testCharge(),
		want:   &Checkout{SessionID: "cs_*", URL: "https://checkout.stripe.com/pay/c/" + fixtureSession, ProviderCustomerID: "cus_1"},
		reqs: []wantRequest{
			{route: "POST /v1/checkout/sessions", key: "trawl-checkout-topup-1", form: session("cus_1")},
		},
	}, {
		name:   "customer created first",
		charge: newCustomer,
		want:   &Checkout{SessionID: "cs_*", URL: "https://checkout.stripe.com/pay/c/" + fixtureSession, ProviderCustomerID: "cus_*"},
		reqs: []wantRequest{
			{route: "POST /v1/customers", key: "trawl-customer-topup-1",
				form: map[string]string{"email": "buyer@example.com", "metadata[account_id]": "acct_1"}},
			{route: "POST /v1/checkout/sessions", key: "trawl-checkout-topup-1", form: session("{created customer}")},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder(t, stripemock.URL(t, "canned"))
			got, err := newTestStripe(t, rec.srv.URL).StartCheckout(context.Background(), tt.charge, success, cancel)
			if err != nil {
				t.Fatal(err)
			}
			// The session must be for the customer just created.
			for _, r := range tt.reqs {
				if r.form["customer"] == "{created customer}" {
					r.form["customer"] = got.ProviderCustomerID
				}
			}
			got.SessionID = createdID(t, got.SessionID, "cs_")
			if tt.want.ProviderCustomerID == "cus_*" {
				got.ProviderCustomerID = createdID(t, got.ProviderCustomerID, "cus_")
			}
			if *got != *tt.want {
				t.Errorf("checkout %+v, want %+v", got, tt.want)
			}
			checkRequests(t, rec.requests(), tt.reqs)
		})
	}
}

func TestStripeCompleteCheckout(t *testing.T) {
	tests := []struct {
		name     string
		mock     string
		session  string
		want     *Paid
		wantPaid bool
		wantErr  error
		reqs     []wantRequest
	}{{
		name:     "paid",
		mock:     "paid",
		session:  fixtureSession,
		want:     &Paid{PaymentID: fixturePI, InvoiceURL: fixtureReceipt, USD: 10, AccountID: "acct_paid", Credits: 10_000_000, ProviderCustomerID: fixtureCustomer},
		wantPaid: true,
		reqs: []wantRequest{{route: "GET /v1/checkout/sessions/" + fixtureSession,
			form: map[string]string{"expand[0]": "payment_intent.latest_charge"}}},
	}, {
		name:    "open",
		mock:    "canned",
		session: fixtureSession,
		reqs:    []wantRequest{{route: "GET /v1/checkout/sessions/" + fixtureSession}},
	}, {
		name:    "no id",
		mock:    "canned",
		wantErr: ErrNoSession,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder(t, stripemock.URL(t, tt.mock))
			got, paid, err := newTestStripe(t, rec.srv.URL).CompleteCheckout(context.Background(), tt.session)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if paid != tt.wantPaid || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v %v, want %+v %v", got, paid, tt.want, tt.wantPaid)
			}
			checkRequests(t, rec.requests(), tt.reqs)
		})
	}
}

// stripeError is the body of a Stripe error answer.
func stripeError(typ, code, decline, msg string) string {
	b, _ := json.Marshal(map[string]any{"error": map[string]string{
		"type": typ, "code": code, "decline_code": decline, "message": msg}})
	return string(b)
}

func paymentIntent(status, lastError string) string {
	pi := map[string]any{"id": "pi_1", "object": "payment_intent", "amount": 1000, "status": status}
	if lastError != "" {
		pi["last_payment_error"] = map[string]string{"type": "card_error", "message": lastError}
	}
	b, _ := json.Marshal(pi)
	return string(b)
}

// TestStripeErrorMapping answers as Stripe does when things go wrong
// (stripe-mock only answers success) and checks what callers see.
func TestStripeErrorMapping(t *testing.T) {
	type answer struct {
		status int
		body   string
	}
	customer := answer{200, `{"id":"cus_1","object":"customer","invoice_settings":{"default_payment_method":"pm_1"}}`}
	tests := []struct {
		name     string
		answers  map[string]answer // by "METHOD path"
		complete bool              // CompleteCheckout instead of ChargeSaved
		wantErr  error
		notErr   []error
		wantMsg  string
	}{{
		name: "insufficient funds",
		answers: map[string]answer{"POST /v1/payment_intents": {402,
			stripeError("card_error", "card_declined", "insufficient_funds", "Your card has insufficient funds.")}},
		wantErr: ErrCardDeclined,
		wantMsg: "card declined: Your card has insufficient funds. (card_declined/insufficient_funds)",
	}, {
		name: "authentication required off-session",
		answers: map[string]answer{"POST /v1/payment_intents": {402,
			stripeError("card_error", "authentication_required", "authentication_required", "Your card was declined. This transaction requires authentication.")}},
		wantErr: ErrCardDeclined,
	}, {
		name:    "payment intent requires action",
		answers: map[string]answer{"POST /v1/payment_intents": {200, paymentIntent("requires_action", "")}},
		wantErr: ErrCardDeclined,
	}, {
		name:    "payment intent requires another card",
		answers: map[string]answer{"POST /v1/payment_intents": {200, paymentIntent("requires_payment_method", "Your card has expired.")}},
		wantErr: ErrCardDeclined,
		wantMsg: "card declined: Your card has expired. (payment pi_1 is requires_payment_method)",
	}, {
		name:    "payment intent processing",
		answers: map[string]answer{"POST /v1/payment_intents": {200, paymentIntent("processing", "")}},
		notErr:  []error{ErrCardDeclined, ErrNoSavedCard},
		wantMsg: "stripe: payment pi_1 is processing, not paid",
	}, {
		name: "key reused with other parameters",
		answers: map[string]answer{"POST /v1/payment_intents": {400,
			stripeError("idempotency_error", "", "", "Keys for idempotent requests can only be used with the same parameters they were first used with.")}},
		wantErr: ErrKeyReused,
	}, {
		name:    "customer deleted at Stripe",
		answers: map[string]answer{"GET /v1/customers/cus_1": {404, stripeError("invalid_request_error", "resource_missing", "", "No such customer: 'cus_1'")}},
		wantErr: ErrNoSavedCard,
	}, {
		name:    "customer marked deleted",
		answers: map[string]answer{"GET /v1/customers/cus_1": {200, `{"id":"cus_1","object":"customer","deleted":true}`}},
		wantErr: ErrNoSavedCard,
	}, {
		name: "customer without cards",
		answers: map[string]answer{
			"GET /v1/customers/cus_1": {200, `{"id":"cus_1","object":"customer","invoice_settings":{"default_payment_method":null}}`},
			"GET /v1/payment_methods": {200, `{"object":"list","data":[],"has_more":false,"url":"/v1/payment_methods"}`},
		},
		wantErr: ErrNoSavedCard,
	}, {
		name:    "stripe fails",
		answers: map[string]answer{"POST /v1/payment_intents": {500, stripeError("api_error", "", "", "Something went wrong.")}},
		notErr:  []error{ErrCardDeclined, ErrNoSavedCard},
		wantMsg: "stripe: charge saved card: api_error 500: Something went wrong. (request req_fail)",
	}, {
		name:     "unknown session",
		complete: true,
		answers:  map[string]answer{"GET /v1/checkout/sessions/cs_gone": {404, stripeError("invalid_request_error", "resource_missing", "", "No such checkout.session: 'cs_gone'")}},
		wantErr:  ErrNoSession,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				a, ok := tt.answers[r.Method+" "+r.URL.Path]
				if !ok && r.URL.Path == "/v1/customers/cus_1" {
					a, ok = customer, true
				}
				if !ok {
					t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
					a = answer{404, stripeError("invalid_request_error", "", "", "unexpected")}
				}
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Stripe-Should-Retry", "false")
				w.Header().Set("Request-Id", "req_fail")
				w.WriteHeader(a.status)
				w.Write([]byte(a.body))
			}))
			defer srv.Close()
			s := newTestStripe(t, srv.URL)
			var err error
			if tt.complete {
				_, _, err = s.CompleteCheckout(context.Background(), "cs_gone")
			} else {
				var paid *Paid
				paid, err = s.ChargeSaved(context.Background(), testCharge())
				if paid != nil {
					t.Errorf("paid %+v", paid)
				}
			}
			if err == nil {
				t.Fatal("no error")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("err %v, want %v", err, tt.wantErr)
			}
			for _, not := range tt.notErr {
				if errors.Is(err, not) {
					t.Errorf("err %v is %v", err, not)
				}
			}
			if tt.wantMsg != "" && err.Error() != tt.wantMsg {
				t.Errorf("err %q, want %q", err, tt.wantMsg)
			}
			if strings.Contains(err.Error(), `{"`) {
				t.Errorf("err %q carries JSON", err)
			}
		})
	}
}
