package payments_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/trawlhq/trawl/gate/payments"
	"github.com/trawlhq/trawl/internal/routes"
)

// A self-hosted top-up: no saved card, so a checkout the operator confirms.
func ExampleLocal() {
	ctx := context.Background()
	local, err := payments.NewLocal(payments.LocalConfig{BaseURL: "https://trawl.example.com"})
	if err != nil {
		panic(err)
	}
	charge := payments.Charge{AccountID: "acct_1", USD: 10, Credits: 10_000_000, IdempotencyKey: "topup-1"}

	_, err = local.ChargeSaved(ctx, charge)
	fmt.Println("saved card:", errors.Is(err, payments.ErrNoSavedCard))

	co, err := local.StartCheckout(ctx, charge, "https://trawl.example.com/billing?paid={CHECKOUT_SESSION_ID}", "")
	if err != nil {
		panic(err)
	}
	fmt.Println(strings.TrimSuffix(co.URL, co.SessionID))

	// The operator presses Confirm on the page at co.URL, served on its row
	// of the route table (which bounds the form).
	pages, err := routes.Mux([]routes.Route{*routes.Default().Row(payments.CheckoutPath)},
		routes.Handlers{payments.CheckoutPath: local.Handler()}, routes.MuxOptions{})
	if err != nil {
		panic(err)
	}
	req := httptest.NewRequest("POST", co.URL, strings.NewReader("confirm=1"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	pages.ServeHTTP(rec, req)
	fmt.Println("confirm:", rec.Code)

	paid, ok, err := local.CompleteCheckout(ctx, co.SessionID)
	if err != nil {
		panic(err)
	}
	fmt.Println("paid:", ok, paid.USD, paid.Credits, paid.PaymentID == "local_"+co.SessionID)
	// Output:
	// saved card: true
	// https://trawl.example.com/v1/billing/checkout/
	// confirm: 303
	// paid: true 10 10000000 true
}
