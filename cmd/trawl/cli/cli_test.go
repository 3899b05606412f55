package cli

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/trawlhq/trawl/cmd/trawl/client"
)

func TestMirrorPath(t *testing.T) {
	start, _ := url.Parse("https://docs.example.org/manual/index.html")
	for _, c := range []struct{ in, want string }{
		{"https://docs.example.org/manual/ch1.html", "manual/ch1.md"},
		{"https://docs.example.org/manual/", "manual/index.md"},
		{"https://docs.example.org/", "index.md"},
		{"https://docs.example.org", "index.md"},
		{"https://docs.example.org/notes.md", "notes.md"},
		{"https://docs.example.org/a/b.txt", "a/b.txt.md"},
		{"https://docs.example.org/search?q=x", "search_q=x.md"},
		{"https://DOCS.example.org/x.htm", "x.md"},
		{"https://blog.example.org/post/1", "blog.example.org/post/1.md"},
		{"https://docs.example.org/../../etc/passwd", "etc/passwd.md"},
		{"https://docs.example.org/a%2F..%2F..%2Fb", "b.md"},
		{"https://docs.example.org/what:is?", "what_is.md"},
	} {
		got, err := mirrorPath(start, c.in)
		if err != nil || got != filepath.FromSlash(c.want) {
			t.Errorf("mirrorPath(%s) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	if _, err := mirrorPath(start, "not a url"); err == nil {
		t.Error("a URL without a host gave a path")
	}
}

func TestDispatch(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"https://example.org/", "-o", "x"}, true},
		{[]string{"--limit", "5", "http://example.org/"}, true},
		{[]string{"--listen", "127.0.0.1:11235", "--data", "d"}, false},
		{[]string{"--proxy", "isp=http://u:p@proxy:8080"}, false},
		{nil, false},
	} {
		if got := IsClientCrawl(c.args); got != c.want {
			t.Errorf("IsClientCrawl(%q) = %v", c.args, got)
		}
	}
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"list"}, true},
		{[]string{"run", "page-links", "url=https://example.org/"}, true},
		{[]string{"list", "--local"}, false},
		{[]string{"run", "page-links", "--input", "url=https://example.org/"}, false},
		{[]string{"run", "page-links", "--input=url=https://example.org/"}, false},
		{[]string{"run", dir}, false},
		{[]string{"new", "--kind", "script", "x"}, false},
		{nil, false},
	} {
		if got := IsClientRecipe(c.args); got != c.want {
			t.Errorf("IsClientRecipe(%q) = %v", c.args, got)
		}
	}
	if got := LocalRecipeArgs([]string{"list", "--local"}); len(got) != 1 || got[0] != "list" {
		t.Errorf("LocalRecipeArgs: %q", got)
	}
}

func TestExitCodes(t *testing.T) {
	for _, c := range []struct {
		status int
		code   string
		want   int
	}{
		{401, "unauthorized", ExitAuth},
		{403, "not_verified", ExitAuth},
		{403, "blocked", ExitError},
		{402, "no_credit", ExitPayment},
		{402, "spend_cap", ExitPayment},
		{404, "not_found", ExitNotFound},
		{429, "rate_limited", ExitRateLimited},
		{400, "bad_input", ExitUsage},
		{409, "retry_pending", ExitUsage},
		{422, "unsupported_content", ExitError},
		{502, "fetch_failed", ExitError},
		{502, "cell_unavailable", ExitServer},
		{503, "no_cell", ExitServer},
		{500, "internal", ExitServer},
	} {
		if got := codeOf(&client.Error{Status: c.status, Code: c.code}); got != c.want {
			t.Errorf("%d %s: exit %d, want %d", c.status, c.code, got, c.want)
		}
	}
}

func TestPollInterval(t *testing.T) {
	for _, c := range []struct {
		limit string
		want  time.Duration
	}{
		{"", pollEvery},
		{"20", 6 * time.Second},
		{"120", time.Second},
		{"6000", pollEvery},
		{"junk", pollEvery},
	} {
		h := http.Header{}
		if c.limit != "" {
			h.Set("X-RateLimit-Limit", c.limit)
		}
		if got := pollInterval(h); got != c.want {
			t.Errorf("limit %q: %s, want %s", c.limit, got, c.want)
		}
	}
}

func TestConfigFileMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trawl", "config.json")
	if err := saveConfig(path, config{URL: "http://127.0.0.1:8080", Key: "k1"}); err != nil {
		t.Fatal(err)
	}
	if err := saveConfig(path, config{URL: "http://127.0.0.1:8080", Key: "k2"}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode: %v %v", fi.Mode(), err)
	}
	if di, _ := os.Stat(filepath.Dir(path)); di.Mode().Perm() != 0o700 {
		t.Errorf("directory mode: %v", di.Mode())
	}
	c, err := loadConfig(path)
	if err != nil || c.Key != "k2" {
		t.Errorf("loaded %+v %v", c, err)
	}
	if m, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".config-*")); len(m) != 0 {
		t.Errorf("temporary files left: %v", m)
	}
}
