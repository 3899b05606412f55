package recipe

import (
	"errors"
	"net/http"

	"github.com/trawlhq/trawl/internal/httpjson"
)

// Error codes of a run (docs/spec/hosted-api.md §7, recipe errors). A
// refused or failed run is an *httpjson.HTTPError with one of them, the
// status of §7 and a message safe to show (it never carries a secret
// input).
const (
	CodeBadInput      = "bad_input"
	CodeUnknownRecipe = "unknown_recipe"
	CodeHostRefused   = "host_refused"
	CodePageBudget    = "page_budget"
	CodeModuleLimit   = "module_limit"
	CodeBadModule     = "bad_module"
	CodeFetchFailed   = "fetch_failed"
	CodeTimeout       = "timeout"
)

func badInput(msg string) *httpjson.HTTPError {
	return &httpjson.HTTPError{Status: http.StatusBadRequest, Code: CodeBadInput, Message: msg}
}

// Unknown is the error for a recipe name not in the catalog.
func Unknown(name string) *httpjson.HTTPError {
	return httpjson.Errorf(http.StatusNotFound, CodeUnknownRecipe, "no recipe named %q (GET /recipes lists them)", name)
}

func hostRefused(host string) *httpjson.HTTPError {
	return httpjson.Errorf(http.StatusForbidden, CodeHostRefused, "the recipe tried %s, which is not one of its allowed hosts", host)
}

func pageBudget(n int) *httpjson.HTTPError {
	return httpjson.Errorf(http.StatusUnprocessableEntity, CodePageBudget, "the run needed more than its budget of %d pages", n)
}

func moduleLimit(format string, a ...any) *httpjson.HTTPError {
	return httpjson.Errorf(http.StatusUnprocessableEntity, CodeModuleLimit, format, a...)
}

func badModule(format string, a ...any) *httpjson.HTTPError {
	return httpjson.Errorf(http.StatusUnprocessableEntity, CodeBadModule, format, a...)
}

func fetchFailed(format string, a ...any) *httpjson.HTTPError {
	return httpjson.Errorf(http.StatusBadGateway, CodeFetchFailed, format, a...)
}

func timeout() *httpjson.HTTPError {
	return httpjson.Errorf(http.StatusGatewayTimeout, CodeTimeout, "the run passed its time limit")
}

// RunError is the §7 error of a failed run: err's *httpjson.HTTPError, or
// a 500 internal one that wraps err without showing it.
func RunError(err error) *httpjson.HTTPError {
	if e, ok := errors.AsType[*httpjson.HTTPError](err); ok {
		return e
	}
	return &httpjson.HTTPError{Status: http.StatusInternalServerError, Code: "internal", Message: "the run failed", Err: err, Private: true}
}

// errBadSession stops a run whose session the site refused.
var errBadSession = errors.New("bad_session")
