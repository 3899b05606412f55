package billing

import (
	"fmt"
	"strings"

	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/ledger"
)

// Error codes of the billing API (docs/billing.md).
const (
	CodeBadInput         = "bad_input"
	CodeUnauthorized     = "unauthorized"
	CodeForbidden        = "forbidden"
	CodeNotFound         = "not_found"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeConflict         = "idempotency_key_reused"
	CodeTooLarge         = "too_large"
	CodeCardDeclined     = "card_declined"
	CodeNoSavedCard      = "no_saved_card"
	CodeNoCredit         = "no_credit"
	CodeSpendCap         = "spend_cap"
	CodePaymentFailed    = "payment_failed"
	CodeLedger           = "ledger_unavailable"
	CodePaymentsOff      = "payments_unavailable"
	CodeInternal         = "internal"
)

// ErrorBody is the body of every error: a stable code and a sentence safe to
// show a person.
type ErrorBody = httpjson.ErrorBody

// Routes named in bodies.
const (
	RouteTopup    = "POST /v1/billing/topup"
	RouteSettings = "POST /v1/billing/settings"
	RouteBalance  = "GET /v1/billing/balance"
	RoutePrices   = "GET /v1/prices"
)

// TopupRoute is the route that buys the pack of usd dollars, e.g.
// "POST /v1/billing/topup?amount=10" (with "&checkout=1" for a checkout).
func TopupRoute(usd int, checkout bool) string {
	s := fmt.Sprintf("%s?amount=%d", RouteTopup, usd)
	if checkout {
		s += "&checkout=1"
	}
	return s
}

// NoCredit is the 402 body when the account is out of credit (docs/spec/hosted-api.md §7).
type NoCredit struct {
	Error   string `json:"error"` // "no_credit"
	Balance string `json:"balance"`
	Message string `json:"message"`
	Actions struct {
		// Topup charges the saved card; Checkout opens a payment page.
		Topup    string `json:"topup"`
		Checkout string `json:"checkout"`
		Prices   string `json:"prices"`
		MCP      string `json:"mcp"`
	} `json:"actions"`
}

// NoCreditBody is the 402 no_credit body. topup is the route to suggest,
// usually TopupRoute(smallest pack, false); its checkout twin is derived.
func NoCreditBody(balance ledger.MC, topup string) NoCredit {
	b := NoCredit{
		Error:   CodeNoCredit,
		Balance: balance.String(),
		Message: fmt.Sprintf("Your balance (%s) does not cover this call. Top up to continue: %s charges your saved card, or add checkout=1 to pay on a checkout page.", balance, topup),
	}
	b.Actions.Topup = topup
	b.Actions.Checkout = withCheckout(topup)
	b.Actions.Prices = RoutePrices
	b.Actions.MCP = "topup tool"
	return b
}

func withCheckout(route string) string {
	if strings.Contains(route, "checkout=") {
		return route
	}
	if strings.Contains(route, "?") {
		return route + "&checkout=1"
	}
	return route + "?checkout=1"
}

// SpendCap is the 402 body when a charge would pass the monthly spend cap
// (docs/spec/hosted-api.md §7).
type SpendCap struct {
	Error   string `json:"error"` // "spend_cap"
	CapLeft string `json:"cap_left"`
	Message string `json:"message"`
	Actions struct {
		Raise    string `json:"raise"`
		RaiseAPI string `json:"raise_api"`
		MCP      string `json:"mcp"`
	} `json:"actions"`
}

// SpendCapBody is the 402 spend_cap body.
func SpendCapBody(capLeft ledger.MC) SpendCap {
	b := SpendCap{
		Error:   CodeSpendCap,
		CapLeft: capLeft.String(),
		Message: fmt.Sprintf("This call would pass your monthly spend cap (%s credits left this month). Raise or remove the cap to continue.", capLeft),
	}
	b.Actions.Raise = "raise the monthly spend cap, or set it to 0 for no cap; it resets on the 1st"
	b.Actions.RaiseAPI = RouteSettings + " {spend_cap_mc}"
	b.Actions.MCP = "spend_cap tool"
	return b
}

// TopupRefused is the 402 body when a saved card did not pay (docs/spec/hosted-api.md §7): the
// client repeats with checkout=1, whose payment page also saves the card.
type TopupRefused struct {
	Error   string `json:"error"` // card_declined, no_saved_card
	Message string `json:"message"`
	Actions struct {
		Checkout   string `json:"checkout"`
		UpdateCard string `json:"update_card"`
	} `json:"actions"`
}

func topupRefused(code, why string, usd int) TopupRefused {
	b := TopupRefused{Error: code}
	b.Actions.Checkout = TopupRoute(usd, true)
	b.Actions.UpdateCard = "pay once with checkout=1: the card used there is saved for later top-ups"
	b.Message = why + " Repeat the top-up with checkout=1 to pay on a checkout page, or update your card."
	return b
}
