package regionauth

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/metering"
)

// The usage header Do reads is metering's.
func TestHeaderUsageIsMeterings(t *testing.T) {
	if headerUsage != metering.Header {
		t.Fatalf("headerUsage %q, metering.Header %q", headerUsage, metering.Header)
	}
}

// Do takes an answer signed over the nonce, status and usage report, and
// refuses one that is unsigned, signed by another region, or too long.
func TestDo(t *testing.T) {
	keys, other := mustKeys(t, NewKey()), mustKeys(t, NewKey())
	v := NewVerifier(keys, nil)
	cell := func(signer *Keys, status int, body string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, err := v.Verify(r)
			if err != nil {
				http.Error(w, err.Error(), http.StatusUnauthorized)
				return
			}
			usage := `{"account":"` + c.Account + `"}`
			w.Header().Set(metering.Header, usage)
			if signer != nil {
				w.Header().Set(HeaderUsageSig, signer.SignAnswer(c.Nonce, status, usage))
			}
			w.WriteHeader(status)
			io.WriteString(w, body)
		}))
	}
	do := func(srv *httptest.Server, max int64) (*Answer, error) {
		t.Helper()
		defer srv.Close()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/search/local?q=x", nil)
		return keys.Do(srv.Client(), req, Claims{Account: "acct1"}, time.Now(), max)
	}
	a, err := do(cell(keys, http.StatusOK, "hello"), 64)
	if err != nil || a.Status != 200 || string(a.Body) != "hello" || a.Usage != `{"account":"acct1"}` || a.OK() != nil {
		t.Fatalf("signed answer: %+v %v", a, err)
	}
	a, err = do(cell(keys, http.StatusTeapot, "no tea"), 64)
	if err != nil || a.OK() == nil || !strings.Contains(a.OK().Error(), "418 no tea") {
		t.Fatalf("signed 418: %+v %v", a, err)
	}
	if _, err := do(cell(nil, http.StatusOK, "hello"), 64); !errors.Is(err, ErrUnsigned) {
		t.Errorf("unsigned answer: %v", err)
	}
	if _, err := do(cell(other, http.StatusOK, "hello"), 64); !errors.Is(err, ErrUnsigned) {
		t.Errorf("another region's answer: %v", err)
	}
	if _, err := do(cell(keys, http.StatusOK, strings.Repeat("x", 65)), 64); !errors.Is(err, ErrTooLong) {
		t.Errorf("long answer: %v", err)
	}
}
