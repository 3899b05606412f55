package fetch

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/trawlhq/trawl/internal/nettest"
)

func TestCheckHeaders(t *testing.T) {
	h, err := CheckHeaders(map[string]string{"x-trace": "abc", "Authorization": "Bearer t", "User-Agent": "mine/1.0", "Cookie": "a=b"})
	if err != nil || h.Get("X-Trace") != "abc" || h.Get("Authorization") != "Bearer t" || len(h) != 4 {
		t.Fatalf("%v %v", h, err)
	}
	if h, err := CheckHeaders(nil); h != nil || err != nil {
		t.Errorf("no headers: %v %v", h, err)
	}
	many := map[string]string{}
	for i := range MaxHeaders + 1 {
		many[fmt.Sprintf("X-%d", i)] = "v"
	}
	for _, tt := range []struct {
		h    map[string]string
		name string // the header named, "" for the set as a whole
	}{
		{map[string]string{"Host": "other.example"}, "Host"},
		{map[string]string{"host": "other.example"}, "host"},
		{map[string]string{"Content-Length": "0"}, "Content-Length"},
		{map[string]string{"Transfer-Encoding": "chunked"}, "Transfer-Encoding"},
		{map[string]string{"Connection": "Upgrade"}, "Connection"},
		{map[string]string{"Proxy-Authorization": "Basic eA=="}, "Proxy-Authorization"},
		{map[string]string{"proxy-connection": "keep-alive"}, "proxy-connection"},
		{map[string]string{"Upgrade": "websocket"}, "Upgrade"},
		{map[string]string{"TE": "trailers"}, "TE"},
		{map[string]string{"Trailer": "X"}, "Trailer"},
		{map[string]string{"Keep-Alive": "timeout=5"}, "Keep-Alive"},
		{map[string]string{"Accept-Encoding": "identity"}, "Accept-Encoding"},
		{map[string]string{"X Space": "v"}, "X Space"},
		{map[string]string{"": "v"}, ""},
		{map[string]string{"X-Nl": "a\nb"}, "X-Nl"},
		{map[string]string{"X-Nul": "a\x00b"}, "X-Nul"},
		{map[string]string{"A": "1", "a": "2"}, "a"},
		{map[string]string{"Cookie": "no equals sign"}, "Cookie"},
		{map[string]string{"X-Big": strings.Repeat("v", MaxHeaderBytes)}, ""},
		{many, ""},
	} {
		_, err := CheckHeaders(tt.h)
		he, ok := errors.AsType[*HeaderError](err)
		if !ok || he.Name != tt.name {
			t.Errorf("%.60v: %v, want a refusal naming %q", tt.h, err, tt.name)
		}
	}
}

// The caller's headers reach the site, replacing the engine's defaults of
// the same name.
func TestHTTPSendsCallersHeaders(t *testing.T) {
	var mu sync.Mutex
	var got http.Header
	srv := nettest.NewServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.Header.Clone()
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><body>ok</body></html>")
	}))
	h := newEngine(t, HTTPConfig{})
	hdr, err := CheckHeaders(map[string]string{"X-Trace": "abc", "User-Agent": "mine/1.0", "Accept-Language": "de"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Fetch(t.Context(), &Request{URL: srv.URL, Header: hdr}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got.Get("X-Trace") != "abc" || got.Get("User-Agent") != "mine/1.0" || got.Get("Accept-Language") != "de" || got.Get("Accept-Encoding") == "" {
		t.Errorf("the site saw %v", got)
	}
}
