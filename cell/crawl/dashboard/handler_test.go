package dashboard_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/trawlhq/trawl/cell/crawl/dashboard"
)

func serve() *httptest.Server {
	mux := http.NewServeMux()
	h := dashboard.Handler()
	mux.Handle(dashboard.Path, h)
	mux.Handle(dashboard.Path+"/", h)
	return httptest.NewServer(mux)
}

func TestHandlerRoutes(t *testing.T) {
	srv := serve()
	defer srv.Close()
	for _, tc := range []struct {
		method, path string
		status       int
		ctype        string
		contains     string
	}{
		{"GET", "/dashboard", 200, "text/html; charset=utf-8", `id="cpu-percent"`},
		{"GET", "/dashboard/", 200, "text/html; charset=utf-8", `id="ws-status"`},
		{"GET", "/dashboard/index.html", 200, "text/html; charset=utf-8", `id="janitor-log"`},
		{"GET", "/dashboard/dashboard.js", 200, "text/javascript; charset=utf-8", "/monitor/ws"},
		{"GET", "/dashboard/dashboard.css", 200, "text/css; charset=utf-8", "--cpu"},
		{"HEAD", "/dashboard", 200, "text/html; charset=utf-8", ""},
		{"GET", "/dashboard/missing.js", 404, "", ""},
		{"GET", "/dashboard/../go.mod", 404, "", ""},
		{"GET", "/dashboard/static/index.html", 404, "", ""},
		{"POST", "/dashboard", 405, "", ""},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: status %d, want %d", tc.method, tc.path, resp.StatusCode, tc.status)
			continue
		}
		if tc.status != 200 {
			continue
		}
		if got := resp.Header.Get("Content-Type"); got != tc.ctype {
			t.Errorf("%s %s: Content-Type %q, want %q", tc.method, tc.path, got, tc.ctype)
		}
		if !strings.Contains(string(body), tc.contains) {
			t.Errorf("%s %s: body lacks %q", tc.method, tc.path, tc.contains)
		}
		if resp.Header.Get("Content-Security-Policy") == "" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s %s: security headers missing: %v", tc.method, tc.path, resp.Header)
		}
	}
}

func TestHandlerETag(t *testing.T) {
	srv := serve()
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/dashboard/dashboard.js")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	etag := resp.Header.Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	req, _ := http.NewRequest("GET", srv.URL+"/dashboard/dashboard.js", nil)
	req.Header.Set("If-None-Match", etag)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotModified {
		t.Fatalf("revalidation: status %d, want 304", resp.StatusCode)
	}
}

// TestAssetsSelfContained: no CDN, no web fonts, no absolute URL to anywhere
// (the page must work on an air-gapped host).
func TestAssetsSelfContained(t *testing.T) {
	srv := serve()
	defer srv.Close()
	external := regexp.MustCompile(`(?i:(https?:)?//[a-z0-9.-]+\.[a-z]{2,})|@import|@font-face|url\(`)
	for _, p := range []string{"/dashboard", "/dashboard/dashboard.js", "/dashboard/dashboard.css"} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if m := external.Find(body); m != nil {
			t.Errorf("%s refers outside the page: %q", p, m)
		}
	}
}
