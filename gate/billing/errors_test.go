package billing

import (
	"encoding/json"
	"testing"

	"github.com/trawlhq/trawl/ledger"
)

func TestPaymentRequiredBodies(t *testing.T) {
	tests := []struct {
		name string
		body any
		want string
	}{
		{"no_credit", NoCreditBody(ledger.MC(250), TopupRoute(5, false)),
			`{"error":"no_credit","balance":"0.250","message":"Your balance (0.250) does not cover this call. Top up to continue: POST /v1/billing/topup?amount=5 charges your saved card, or add checkout=1 to pay on a checkout page.","actions":{"topup":"POST /v1/billing/topup?amount=5","checkout":"POST /v1/billing/topup?amount=5\u0026checkout=1","prices":"GET /v1/prices","mcp":"topup tool"}}`},
		{"spend_cap", SpendCapBody(ledger.MC(1500)),
			`{"error":"spend_cap","cap_left":"1.500","message":"This call would pass your monthly spend cap (1.500 credits left this month). Raise or remove the cap to continue.","actions":{"raise":"raise the monthly spend cap, or set it to 0 for no cap; it resets on the 1st","raise_api":"POST /v1/billing/settings {spend_cap_mc}","mcp":"spend_cap tool"}}`},
	}
	for _, tt := range tests {
		got, err := json.Marshal(tt.body)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
	if got := NoCreditBody(0, "POST /v1/billing/topup").Actions.Checkout; got != "POST /v1/billing/topup?checkout=1" {
		t.Errorf("checkout of a bare route: %q", got)
	}
	if got := TopupRoute(10, true); got != "POST /v1/billing/topup?amount=10&checkout=1" {
		t.Errorf("TopupRoute: %q", got)
	}
}
