package sitemap

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
)

// resp is what the test site answers for one URL.
type resp struct {
	status int // 0 is 200
	ctype  string
	body   []byte
	// block, when set, holds the request until the client gives up and
	// is closed (once) when the request arrives.
	block chan struct{}
}

// site is a set of virtual hosts on one loopback server: the test Fetcher
// sends every host's URLs to it with the host in the Host header, so
// a.example.test and b.a.example.test are two sites to Map.
type site struct {
	srv   *httptest.Server
	mu    sync.Mutex
	pages map[string]resp // "host/path?query" -> answer
	down  map[string]bool // hosts that give no answer
	got   []string        // URLs fetched, in order
}

func newSite(t *testing.T) *site {
	t.Helper()
	s := &site{pages: map[string]resp{}, down: map[string]bool{}}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.srv.Listener = l
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	return s
}

func (s *site) serve(w http.ResponseWriter, r *http.Request) {
	key := r.Host + r.URL.RequestURI()
	s.mu.Lock()
	p, ok := s.pages[key]
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	if p.block != nil {
		close(p.block)
		<-r.Context().Done()
		return
	}
	if p.ctype != "" {
		w.Header().Set("Content-Type", p.ctype)
	}
	if p.status != 0 {
		w.WriteHeader(p.status)
	}
	w.Write(p.body)
}

// set serves body at rawURL ("http://host/path").
func (s *site) set(rawURL, ctype string, body []byte) {
	u, err := url.Parse(rawURL)
	if err != nil {
		panic(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pages[u.Host+u.RequestURI()] = resp{ctype: ctype, body: body}
}

func (s *site) html(rawURL, body string) { s.set(rawURL, "text/html; charset=utf-8", []byte(body)) }
func (s *site) xml(rawURL, body string)  { s.set(rawURL, "application/xml", []byte(body)) }
func (s *site) text(rawURL, body string) { s.set(rawURL, "text/plain", []byte(body)) }

// fetched is the list of URLs fetched so far.
func (s *site) fetched() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

// fetcher is a Fetcher that reaches the site on loopback whatever the
// URL's host, reading at most DefaultMaxBodyBytes+1 of a body.
func (s *site) fetcher() Fetcher {
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableCompression: true}}
	return func(ctx context.Context, raw string) (int, string, []byte, error) {
		u, err := url.Parse(raw)
		if err != nil {
			return 0, "", nil, err
		}
		s.mu.Lock()
		s.got = append(s.got, raw)
		down := s.down[u.Host]
		s.mu.Unlock()
		if down {
			return 0, "", nil, errors.New("connection refused")
		}
		target := *u
		target.Scheme, target.Host = "http", s.srv.Listener.Addr().String()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target.String(), nil)
		if err != nil {
			return 0, "", nil, err
		}
		req.Host = u.Host
		res, err := client.Do(req)
		if err != nil {
			return 0, "", nil, err
		}
		defer res.Body.Close()
		body, err := io.ReadAll(io.LimitReader(res.Body, DefaultMaxBodyBytes+1))
		return res.StatusCode, res.Header.Get("Content-Type"), body, err
	}
}

func gz(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func urlsOf(links []Link) []string {
	out := make([]string, len(links))
	for i, l := range links {
		out[i] = l.URL
	}
	return out
}

func linkByURL(links []Link, u string) (Link, bool) {
	for _, l := range links {
		if l.URL == u {
			return l, true
		}
	}
	return Link{}, false
}
