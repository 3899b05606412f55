package fcapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/routes"
)

type Inner struct {
	Formats []string `json:"formats"`
}

type body struct {
	URL string `json:"url"`
	Inner
}

// decode runs Decode on a body as the row's handler does (within the
// row's limit).
func decode(t *testing.T, in string) (body, error) {
	t.Helper()
	var b body
	var err error
	mux, merr := routes.Mux([]routes.Route{{Pattern: "POST /v2/x", Server: routes.Cell, BodyLimit: 1 << 10}},
		routes.Handlers{"POST /v2/x": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { err = Decode(w, r, &b) })}, routes.MuxOptions{})
	if merr != nil {
		t.Fatal(merr)
	}
	mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/v2/x", strings.NewReader(in)))
	return b, err
}

// A wrong type inside an embedded struct is named by the path the client
// sent; an unknown key is ignored; a body over the row's limit is a 413.
func TestDecodeNamesTheJSONPath(t *testing.T) {
	_, err := decode(t, `{"url":"u","formats":"markdown","origin":"sdk"}`)
	fe, ok := errors.AsType[*Error](err)
	if !ok || fe.Status != 400 || fe.Code != CodeBadRequest || strings.Contains(fe.Message, "Inner") || !strings.Contains(fe.Message, "formats") {
		t.Fatalf("%v", err)
	}
	if b, err := decode(t, `{"url":"u","origin":"sdk"}`); err != nil || b.URL != "u" {
		t.Fatalf("unknown key: %v %+v", err, b)
	}
	if _, err := decode(t, `{"url":"`+strings.Repeat("x", 2<<10)+`"}`); err == nil {
		t.Fatal("a body over the limit was read")
	} else if fe, ok := errors.AsType[*Error](err); !ok || fe.Status != 413 {
		t.Fatalf("over the limit: %v", err)
	}
}

func TestWriteError(t *testing.T) {
	tests := []struct {
		err    error
		status int
		code   string
	}{
		{Unsupported("headers", "no headers"), 400, CodeUnsupported},
		{&httpjson.HTTPError{Status: 502, Code: "fetch_failed", Message: "the site did not answer"}, 502, CodeScrapeFailed},
		{&httpjson.HTTPError{Status: 503, Code: "fleet-busy", Message: "busy", RetryAfter: 1500 * time.Millisecond}, 503, CodeInternal},
		{errors.New("boom"), 500, CodeInternal},
	}
	for _, tt := range tests {
		w := httptest.NewRecorder()
		WriteError(w, tt.err)
		var env Envelope
		if err := json.Unmarshal(w.Body.Bytes(), &env); err != nil || w.Code != tt.status || env.Success || env.Code != tt.code || env.Error == "" {
			t.Errorf("%v: %d %s", tt.err, w.Code, w.Body)
		}
		if tt.status == 503 && w.Header().Get("Retry-After") != "2" {
			t.Errorf("Retry-After %q", w.Header().Get("Retry-After"))
		}
		if tt.status == 500 && strings.Contains(w.Body.String(), "boom") {
			t.Errorf("a 500 shows its cause: %s", w.Body)
		}
	}
}
