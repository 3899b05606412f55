// Package testcorpus serves real HTML to tests from loopback: Debian's
// documentation packages, installed by `make deps-test`.
package testcorpus

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"sync/atomic"
	"testing"
)

// PostgresDocs is where postgresql-doc-15 installs its HTML (1,169 pages).
const PostgresDocs = "/usr/share/doc/postgresql-doc-15/html"

// Pages lists the .html files of dir, sorted. The test fails when the corpus
// is missing: `make deps-test` installs it.
func Pages(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.html"))
	if err != nil || len(m) == 0 {
		t.Fatalf("corpus %s is missing: run `make deps-test` (installs postgresql-doc-15)", dir)
	}
	names := make([]string, len(m))
	for i, p := range m {
		names[i] = filepath.Base(p)
	}
	sort.Strings(names)
	return names
}

// Server serves a directory over HTTP on 127.0.0.1 and counts requests.
type Server struct {
	*httptest.Server
	hits atomic.Int64
}

// Hits is the number of requests served so far.
func (s *Server) Hits() int64 { return s.hits.Load() }

// Serve serves dir on a fresh 127.0.0.1 port until the test ends.
func Serve(t testing.TB, dir string) *Server {
	t.Helper()
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("corpus %s is missing: run `make deps-test`", dir)
	}
	s := &Server{}
	fs := http.FileServer(http.Dir(dir))
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		fs.ServeHTTP(w, r)
	}))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Listener = l
	s.Start()
	t.Cleanup(s.Close)
	return s
}
