package httpjson

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestHTTPError(t *testing.T) {
	cause := errors.New("dial tcp 10.0.0.7:3128: connection refused")
	tests := []struct {
		name string
		err  *HTTPError
		text string // Error()
		body ErrorBody
	}{
		{"formatted", Errorf(http.StatusBadRequest, "bad_input", "urls must hold 1 to %d URLs (got %d)", 100, 0),
			"urls must hold 1 to 100 URLs (got 0)", ErrorBody{"bad_input", "urls must hold 1 to 100 URLs (got 0)"}},
		{"cause shown", &HTTPError{Status: http.StatusBadGateway, Code: "fetch_failed", Message: "the site did not answer", Err: cause},
			"the site did not answer: " + cause.Error(), ErrorBody{"fetch_failed", "the site did not answer: " + cause.Error()}},
		{"private cause", &HTTPError{Status: http.StatusBadGateway, Code: "fetch_failed", Message: "the cell's proxy did not answer", Err: cause, Private: true},
			"the cell's proxy did not answer: " + cause.Error(), ErrorBody{"fetch_failed", "the cell's proxy did not answer"}},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.text {
			t.Errorf("%s: Error() %q, want %q", tt.name, got, tt.text)
		}
		if got := tt.err.Body(); got != tt.body {
			t.Errorf("%s: Body() %+v, want %+v", tt.name, got, tt.body)
		}
		if (tt.err.Err != nil) != errors.Is(tt.err, cause) {
			t.Errorf("%s: errors.Is(cause) %v with Err %v", tt.name, !errors.Is(tt.err, cause), tt.err.Err)
		}
	}
}

func TestWriteError(t *testing.T) {
	cause := errors.New("proxy 10.0.0.7:3128 refused")
	busy := &HTTPError{Status: http.StatusServiceUnavailable, Code: "fleet-busy", Message: "no browser is free right now", RetryAfter: 5 * time.Second}
	tests := []struct {
		name       string
		err        error
		status     int
		body       string
		retryAfter string
	}{
		{"http error", Errorf(http.StatusNotFound, "not_found", "no such job"),
			404, `{"error":"not_found","message":"no such job"}`, ""},
		{"wrapped", fmt.Errorf("job 7: %w", Errorf(http.StatusConflict, "no_hold", "no such hold, or it expired")),
			409, `{"error":"no_hold","message":"no such hold, or it expired"}`, ""},
		{"cause shown", &HTTPError{Status: http.StatusBadGateway, Code: "fetch_failed", Message: "the site did not answer", Err: context.DeadlineExceeded},
			502, `{"error":"fetch_failed","message":"the site did not answer: context deadline exceeded"}`, ""},
		{"private cause", &HTTPError{Status: http.StatusBadGateway, Code: "fetch_failed", Message: "the cell's proxy did not answer", Err: cause, Private: true},
			502, `{"error":"fetch_failed","message":"the cell's proxy did not answer"}`, ""},
		{"retry after", busy, 503, `{"error":"fleet-busy","message":"no browser is free right now"}`, "5"},
		{"retry after rounds up", &HTTPError{Status: 503, Code: "try_again", Message: "try again", RetryAfter: 1500 * time.Millisecond},
			503, `{"error":"try_again","message":"try again"}`, "2"},
		{"decode error", &DecodeError{Problem: TooLarge, Limit: 64},
			413, `{"error":"too_large","message":"request body is larger than 64 bytes"}`, ""},
		{"wrapped decode error", fmt.Errorf("scrape: %w", &DecodeError{Problem: Empty}),
			400, `{"error":"bad_input","message":"request body is empty; send a JSON object"}`, ""},
		{"any other error", fmt.Errorf("open store: %w", cause),
			500, `{"error":"internal","message":"something went wrong on our side; try again"}`, ""},
	}
	for _, tt := range tests {
		w := httptest.NewRecorder()
		WriteError(w, tt.err)
		if w.Code != tt.status || w.Body.String() != tt.body+"\n" {
			t.Errorf("%s: %d %q, want %d %q", tt.name, w.Code, w.Body.String(), tt.status, tt.body)
		}
		if got := w.Header().Get("Retry-After"); got != tt.retryAfter {
			t.Errorf("%s: Retry-After %q, want %q", tt.name, got, tt.retryAfter)
		}
		if w.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s: Content-Type %q", tt.name, w.Header().Get("Content-Type"))
		}
		if strings.Contains(w.Body.String(), "10.0.0.7") {
			t.Errorf("%s: a private cause was shown: %q", tt.name, w.Body.String())
		}
	}
}

func TestAsHTTPError(t *testing.T) {
	own := Errorf(http.StatusForbidden, "blocked", "blocked")
	if got := AsHTTPError(fmt.Errorf("run: %w", own)); got != own {
		t.Errorf("a wrapped *HTTPError: %+v, want the error itself", got)
	}
	cause := errors.New("disk full")
	got := AsHTTPError(cause)
	if got.Status != 500 || got.Code != "internal" || !got.Private || !errors.Is(got, cause) {
		t.Errorf("a plain error: %+v, want a private 500 internal wrapping it", got)
	}
}

func ExampleWriteError() {
	w := httptest.NewRecorder()
	err := fmt.Errorf("job 7: %w", Errorf(http.StatusNotFound, "not_found", "no such job"))
	WriteError(w, err)
	fmt.Print(w.Code, " ", w.Body.String())
	// Output: 404 {"error":"not_found","message":"no such job"}
}
