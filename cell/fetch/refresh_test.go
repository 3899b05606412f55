package fetch

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/trawlhq/trawl/internal/nettest"
)

func TestParseRefresh(t *testing.T) {
	tests := []struct {
		in     string
		delay  int
		target string
		ok     bool
	}{
		{"0; url=/next", 0, "/next", true},
		{"0;URL='/next page'", 0, "/next page", true},
		{`3, "https://example.com/a"`, 3, "https://example.com/a", true},
		{"5;url = next.html", 5, "next.html", true},
		{"0.5; url=/a", 0, "/a", true},
		{".5; url=/a", 0, "/a", true},
		{"300", 300, "", true},
		{"  10 ; /b", 10, "/b", true},
		{"soon; url=/a", 0, "", false},
		{"", 0, "", false},
		{"1 url=/a", 0, "", false},
	}
	for _, tt := range tests {
		d, u, ok := parseRefresh(tt.in)
		if d != tt.delay || u != tt.target || ok != tt.ok {
			t.Errorf("parseRefresh(%q) = %d, %q, %v; want %d, %q, %v", tt.in, d, u, ok, tt.delay, tt.target, tt.ok)
		}
	}
}

func TestRefreshTarget(t *testing.T) {
	const page = "https://example.com/dir/page.html"
	tests := []struct {
		name, html, want string
	}{
		{"immediate", `<head><meta http-equiv="refresh" content="0; url=../moved.html">`, "https://example.com/moved.html"},
		{"upper case", `<HEAD><META HTTP-EQUIV="Refresh" CONTENT="2;URL=https://other.example/x">`, "https://other.example/x"},
		{"too slow", `<meta http-equiv="refresh" content="30; url=/moved">`, ""},
		{"periodic reload", `<meta http-equiv="refresh" content="300">`, ""},
		{"reload of itself", `<meta http-equiv="refresh" content="0; url=page.html#top">`, ""},
		{"not http", `<meta http-equiv="refresh" content="0; url=javascript:alert(1)">`, ""},
		{"in the body is ignored", `<body><meta http-equiv="refresh" content="0; url=/x">`, ""},
		{"name is not http-equiv", `<meta name="refresh" content="0; url=/x">`, ""},
	}
	for _, tt := range tests {
		if got := refreshTarget([]byte(tt.html), page); got != tt.want {
			t.Errorf("%s: refreshTarget = %q; want %q", tt.name, got, tt.want)
		}
	}
}

func TestFetchFollowsMetaRefresh(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/old", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<html><head><meta http-equiv="refresh" content="0; url=/hop"></head><body>Moved.</body></html>`))
	})
	mux.HandleFunc("/hop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/new", http.StatusFound)
	})
	mux.HandleFunc("/new", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<html><head><meta http-equiv="refresh" content="600"></head><body>The page.</body></html>`))
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<meta http-equiv="refresh" content="0; url=/loop2">`))
	})
	mux.HandleFunc("/loop2", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<meta http-equiv="refresh" content="0; url=/loop">`))
	})
	srv := nettest.NewServer(t, mux)

	h := newEngine(t, HTTPConfig{MaxRedirects: 3})
	resp, err := h.Fetch(t.Context(), &Request{URL: srv.URL + "/old"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(resp.URL, "/new") || resp.Redirects != 2 || !strings.Contains(string(resp.Body), "The page.") {
		t.Errorf("URL %q, Redirects %d, Body %q; want /new after 2 redirects", resp.URL, resp.Redirects, resp.Body)
	}
	if _, err := h.Fetch(t.Context(), &Request{URL: srv.URL + "/loop"}); !isOnly(err, ErrTooManyRedirects) {
		t.Errorf("refresh loop: Fetch = %v; want ErrTooManyRedirects", err)
	}

	// With redirects off, the refresh page is the answer.
	h = newEngine(t, HTTPConfig{MaxRedirects: -1})
	resp, err = h.Fetch(t.Context(), &Request{URL: srv.URL + "/old"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(resp.URL, "/old") || resp.Redirects != 0 {
		t.Errorf("MaxRedirects -1: URL %q, Redirects %d; want /old, 0", resp.URL, resp.Redirects)
	}
}

// A caller's Cookie (a recipe's session) and Authorization go to the
// page's host only: not through a meta refresh or an HTTP redirect to
// another host name, while a hop on the same host keeps them. Other
// headers of the caller go everywhere.
func TestCookieStaysOnItsHost(t *testing.T) {
	var got = map[string]string{}
	var mu sync.Mutex
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got[r.Host+r.URL.Path] = r.Header.Get("Cookie") + "|" + r.Header.Get("Authorization") + "|" + r.Header.Get("X-Trace")
		mu.Unlock()
		port := r.Host[strings.LastIndex(r.Host, ":"):]
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/refresh":
			fmt.Fprintf(w, `<html><head><meta http-equiv="refresh" content="0; url=http://localhost%s/landing-r"></head></html>`, port)
		case "/redirect":
			http.Redirect(w, r, "http://localhost"+port+"/landing-h", http.StatusFound)
		case "/same":
			http.Redirect(w, r, "/landing", http.StatusFound)
		default:
			fmt.Fprint(w, "<html><body>landed</body></html>")
		}
	})
	srv := nettest.NewServer(t, mux)
	h := newEngine(t, HTTPConfig{})
	for _, path := range []string{"/refresh", "/redirect", "/same"} {
		hdr := http.Header{"Cookie": {"sid=s3cret"}, "Authorization": {"Bearer t0ken"}, "X-Trace": {"t1"}}
		if _, err := h.Fetch(t.Context(), &Request{URL: srv.URL + path, Header: hdr}); err != nil {
			t.Fatal(err)
		}
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	port := host[strings.LastIndex(host, ":"):]
	mu.Lock()
	defer mu.Unlock()
	const all = "sid=s3cret|Bearer t0ken|t1"
	if got[host+"/refresh"] != all || got[host+"/same"] != all || got[host+"/landing"] != all {
		t.Errorf("the page's own host did not get the cookie and credentials: %v", got)
	}
	for _, p := range []string{"/landing-r", "/landing-h"} {
		if c, ok := got["localhost"+port+p]; !ok || c != "||t1" {
			t.Errorf("another host got %q at %s (%v)", c, p, got)
		}
	}
}
