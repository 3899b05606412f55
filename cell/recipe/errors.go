package recipe

import (
	"errors"
	"fmt"
	"net/http"
)

// Error codes of a run (docs/spec/hosted-api.md §7, recipe errors).
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

// Error is a refused or failed run: the status and code of §7 and a
// message safe to show (it never carries a secret input).
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func newError(status int, code, format string, a ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, a...)}
}

func badInput(msg string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: CodeBadInput, Message: msg}
}

// Unknown is the error for a recipe name not in the catalog.
func Unknown(name string) *Error {
	return newError(http.StatusNotFound, CodeUnknownRecipe, "no recipe named %q (GET /recipes lists them)", name)
}

func hostRefused(host string) *Error {
	return newError(http.StatusForbidden, CodeHostRefused, "the recipe tried %s, which is not one of its allowed hosts", host)
}

func pageBudget(n int) *Error {
	return newError(http.StatusUnprocessableEntity, CodePageBudget, "the run needed more than its budget of %d pages", n)
}

func moduleLimit(format string, a ...any) *Error {
	return newError(http.StatusUnprocessableEntity, CodeModuleLimit, format, a...)
}

func badModule(format string, a ...any) *Error {
	return newError(http.StatusUnprocessableEntity, CodeBadModule, format, a...)
}

func fetchFailed(format string, a ...any) *Error {
	return newError(http.StatusBadGateway, CodeFetchFailed, format, a...)
}

func timeout() *Error {
	return newError(http.StatusGatewayTimeout, CodeTimeout, "the run passed its time limit")
}

// AsError is err as an *Error, or nil.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// errBadSession stops a run whose session the site refused.
var errBadSession = errors.New("bad_session")
