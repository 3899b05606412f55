package billing

import (
	"math"
	"net/http"
	"time"

	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/ledger"
)

// Firecrawl's team usage routes (docs/firecrawl.md): the account's credit
// in Firecrawl's shape, from the same ledger view as GET
// /v1/billing/balance.

// teamCredits is the data of GET /v2/team/credit-usage.
type teamCredits struct {
	// RemainingCredits is the balance, in credits (trawl's are exact to a
	// thousandth; Firecrawl's SDKs read a number).
	RemainingCredits float64 `json:"remainingCredits"`
	// PlanCredits is the plan's monthly grant.
	PlanCredits        float64 `json:"planCredits"`
	BillingPeriodStart *string `json:"billingPeriodStart"`
	BillingPeriodEnd   *string `json:"billingPeriodEnd"`
}

// teamTokens is the data of GET /v2/team/token-usage: trawl bills model
// tokens in credits, so the tokens left are what the balance buys at the
// price of input tokens (the cheaper side; docs/firecrawl.md).
type teamTokens struct {
	RemainingTokens    int64   `json:"remainingTokens"`
	PlanTokens         int64   `json:"planTokens"`
	BillingPeriodStart *string `json:"billingPeriodStart"`
	BillingPeriodEnd   *string `json:"billingPeriodEnd"`
}

type teamAnswer struct {
	Success bool `json:"success"`
	Data    any  `json:"data"`
}

// period is the calendar month now is in, as Firecrawl's billing period.
func period(now time.Time) (start, end *string) {
	now = now.UTC()
	s := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	e := s.AddDate(0, 1, 0)
	ss, es := s.Format(time.RFC3339), e.Format(time.RFC3339)
	return &ss, &es
}

func asCredits(mc ledger.MC) float64 { return float64(mc) / 1000 }

func (h *handler) teamCreditUsage(w http.ResponseWriter, r *http.Request, _ *ledger.Key, a *ledger.Account) {
	remaining, grant, err := h.teamCredit(a)
	if err != nil {
		h.internal(w, "team credit usage", err)
		return
	}
	d := teamCredits{RemainingCredits: asCredits(remaining), PlanCredits: asCredits(grant)}
	d.BillingPeriodStart, d.BillingPeriodEnd = period(h.cfg.Now())
	httpjson.Write(w, http.StatusOK, teamAnswer{Success: true, Data: d})
}

func (h *handler) teamTokenUsage(w http.ResponseWriter, r *http.Request, _ *ledger.Key, a *ledger.Account) {
	remaining, grant, err := h.teamCredit(a)
	if err != nil {
		h.internal(w, "team token usage", err)
		return
	}
	tp := h.cfg.CurrentPrices().Tokens
	tokens := func(mc ledger.MC) int64 {
		if tp.Input <= 0 || tp.Per <= 0 || mc <= 0 {
			return 0
		}
		// A whole block of Per tokens costs Input.
		return int64(math.Floor(float64(mc)/float64(tp.Input))) * int64(tp.Per)
	}
	d := teamTokens{RemainingTokens: tokens(remaining), PlanTokens: tokens(grant)}
	d.BillingPeriodStart, d.BillingPeriodEnd = period(h.cfg.Now())
	httpjson.Write(w, http.StatusOK, teamAnswer{Success: true, Data: d})
}

// teamCredit is a's spendable balance (as GET /v1/billing/balance shows
// it, unsettled spending taken off) and its plan's monthly grant.
func (h *handler) teamCredit(a *ledger.Account) (remaining, grant ledger.MC, err error) {
	v, unsettled, err := view(h.cfg, a.ID)
	if err != nil {
		return 0, 0, err
	}
	remaining = max(v.Balance.Total-unsettled, 0)
	grant = ledger.MC(h.cfg.CurrentPrices().Grants.Monthly[v.Account.Plan])
	return remaining, grant, nil
}
