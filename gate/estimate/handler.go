package estimate

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/routes"
)

// Config configures Handlers. Prices is required.
type Config struct {
	// Prices is the price table every number comes from.
	Prices *billing.Prices
	// Table, when set, holds the table in force instead of Prices (an
	// operator may change the gate's).
	Table *billing.Table
	// Observer is what the region's cells were seen doing; nil: nothing
	// seen (every site unknown, default token bands).
	Observer *Observer
	// Logger receives internal errors (default slog.Default).
	Logger *slog.Logger
}

// Handlers are the estimate's handler by its row of the route table
// (internal/routes, service estimate): POST /v1/estimate, a Request in, an
// Estimate out; 400 bad_input for a request the call itself would refuse,
// 413 too_large over the row's BodyLimit. An estimate is free. It panics
// without Prices.
func Handlers(cfg Config) routes.Handlers {
	if cfg.Prices == nil {
		panic("estimate: Config needs Prices")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return routes.Handlers{"POST /v1/estimate": &handler{cfg: cfg}}
}

type handler struct{ cfg Config }

// Error codes of the route (as in docs/api.md).
const (
	codeBadInput = "bad_input"
	codeTooLarge = "too_large"
	codeInternal = "internal"
)

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req Request
	if status, code, msg := decode(w, r, &req); status != 0 {
		httpjson.Error(w, status, code, msg)
		return
	}
	prices := h.cfg.Prices
	if h.cfg.Table != nil {
		prices = h.cfg.Table.Load()
	}
	est, err := Compute(prices, h.cfg.Observer, &req)
	if bad, ok := errors.AsType[*BadInputError](err); ok {
		httpjson.Error(w, http.StatusBadRequest, codeBadInput, bad.Message)
		return
	}
	if err != nil {
		h.cfg.Logger.Error("estimate: compute", "err", err)
		httpjson.Error(w, http.StatusInternalServerError, codeInternal, "something went wrong on our side; try again")
		return
	}
	httpjson.Write(w, http.StatusOK, est)
}

// decode reads one JSON object of at most the row's BodyLimit into req;
// unknown fields are the priced call's own and are ignored. A non-zero
// status is the refusal.
func decode(w http.ResponseWriter, r *http.Request, req *Request) (int, string, string) {
	limit := routes.Limit(r)
	tooLarge := fmt.Sprintf("the body is over %d MiB", limit>>20)
	if r.ContentLength > limit {
		return http.StatusRequestEntityTooLarge, codeTooLarge, tooLarge
	}
	err := httpjson.DecodeLenient(w, r, limit, req)
	de, ok := errors.AsType[*httpjson.DecodeError](err)
	if !ok {
		return 0, "", ""
	}
	switch de.Problem {
	case httpjson.TooLarge:
		return http.StatusRequestEntityTooLarge, codeTooLarge, tooLarge
	case httpjson.WrongType:
		if de.Field == "" {
			return http.StatusBadRequest, codeBadInput, "the body must be a JSON object"
		}
		return http.StatusBadRequest, codeBadInput, fmt.Sprintf("%s must be %s", de.Field, typeName(de.Field))
	case httpjson.Empty:
		return http.StatusBadRequest, codeBadInput, "the body is empty; send a JSON object with endpoint and url or urls"
	}
	return http.StatusBadRequest, codeBadInput, "the body is not valid JSON: " + de.Err.Error()
}

// typeName says what a field of Request must be ("urls.3" is one URL).
func typeName(field string) string {
	switch field {
	case "urls":
		return "an array of strings"
	case "units":
		return "a whole number"
	}
	return "a string"
}
