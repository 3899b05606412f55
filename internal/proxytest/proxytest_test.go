package proxytest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestProxyForwardsAndLogs(t *testing.T) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "via="+r.Header.Get("Via"))
	}))
	defer origin.Close()
	p := Start(t, Options{Auth: true})
	pu, _ := url.Parse(p.URL())
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
	resp, err := client.Get(origin.URL + "/hello")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "tinyproxy") {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if !p.WaitSaw("GET "+origin.URL+"/hello", 5*time.Second) {
		t.Fatalf("request not in the log: %q", p.Requests())
	}

	// Without the credentials the proxy refuses.
	bare := &url.URL{Scheme: "http", Host: p.Addr}
	client = &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(bare)}}
	resp, err = client.Get(origin.URL + "/hello")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusProxyAuthRequired {
		t.Fatalf("no credentials: %d", resp.StatusCode)
	}
}
