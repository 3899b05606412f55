package billing

import (
	"os"
	"strings"
	"testing"

	"github.com/trawlhq/trawl/gate/payments"
	"github.com/trawlhq/trawl/gate/payments/stripemock"
)

func TestMain(m *testing.M) {
	code := m.Run()
	stripemock.StopAll()
	os.Exit(code)
}

// Issue 12, item 13, against stripe-mock: the customer a checkout creates
// is stored on the account (a ledger command), so the card it saves pays
// the next saved-card top-up; before, every saved-card top-up answered
// no_saved_card because the customer id was never kept.
func TestCheckoutKeepsTheCustomerForSavedCardTopups(t *testing.T) {
	backend := stripemock.URL(t, "paid")
	e := newEnvWith(t, func(string) (payments.Provider, error) {
		return payments.NewStripe(payments.StripeConfig{SecretKey: "sk_test_123", BackendURL: backend})
	})
	if r := e.do("POST", "/v1/billing/topup?amount=10", keyUser, ""); r.status != 402 || r.errCode(t) != CodeNoSavedCard {
		t.Fatalf("saved card before any checkout: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/v1/billing/topup?amount=10&checkout=1", keyUser, ""); r.status != 200 {
		t.Fatalf("checkout: %d %s", r.status, r.body)
	}
	cus := e.acct("acct1").ProviderCustomerID
	if !strings.HasPrefix(cus, "cus_") {
		t.Fatalf("the checkout's customer is not on the account: %q", cus)
	}
	r := e.do("POST", "/v1/billing/topup?amount=10", keyUser, "")
	if r.status != 200 {
		t.Fatalf("saved card after the checkout: %d %s", r.status, r.body)
	}
	var got Topup
	r.json(t, &got)
	if !got.Paid || !strings.HasPrefix(got.PaymentID, "pi_") {
		t.Fatalf("%s", r.body)
	}
	if e.acct("acct1").ProviderCustomerID != cus || e.acct("acct2").ProviderCustomerID != "" {
		t.Fatal("the customer moved")
	}
	e.audit()
}
