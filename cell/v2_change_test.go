package cell

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

type trackDoc struct {
	Markdown       *string `json:"markdown"`
	ChangeTracking *struct {
		PreviousScrapeAt *string `json:"previousScrapeAt"`
		ChangeStatus     string  `json:"changeStatus"`
		Visibility       string  `json:"visibility"`
		Diff             *struct {
			Text string `json:"text"`
			JSON struct {
				Files []struct {
					Additions, Deletions int
					Chunks               []struct {
						Changes []struct {
							Type    string `json:"type"`
							Content string `json:"content"`
						} `json:"changes"`
					} `json:"chunks"`
				} `json:"files"`
			} `json:"json"`
		} `json:"diff"`
	} `json:"changeTracking"`
}

// Change tracking compares a page with the account's last tracked scrape
// of it (per tag): new, same, changed with a git diff, removed; another
// account has its own history.
func TestV2ChangeTracking(t *testing.T) {
	var version atomic.Int64
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := version.Load()
		if v == 3 {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		price := map[int64]string{0: "12", 1: "12", 2: "15"}[v]
		fmt.Fprintf(w, `<!doctype html><html><head><title>Kettle</title></head><body><main><article><h1>The copper kettle</h1>
<p>The copper kettle boils a litre of water in four minutes, faster than any other kettle we tried this year.</p>
<p>It costs %s pounds at the shop on the corner, which also sells the lids.</p></article></main></body></html>`, price)
	}))
	defer site.Close()
	tc := newTestCell(t, nil)
	scrape := func(account, body string) trackDoc {
		t.Helper()
		tc.now.Add(int64(time.Hour)) // past the cache: each scrape fetches
		resp, b := tc.do(t, "POST", "/v2/scrape", body, account, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("scrape: %d %s", resp.StatusCode, b)
		}
		var r struct {
			Data trackDoc `json:"data"`
		}
		json.Unmarshal(b, &r)
		if r.Data.ChangeTracking == nil {
			t.Fatalf("no changeTracking: %s", b)
		}
		return r.Data
	}
	body := `{"url": "` + site.URL + `/kettle", "maxAge": 0, "formats": ["markdown", {"type": "changeTracking", "modes": ["git-diff"]}]}`
	d := scrape("", body)
	if ct := d.ChangeTracking; ct.ChangeStatus != "new" || ct.PreviousScrapeAt != nil || ct.Visibility != "visible" || ct.Diff != nil {
		t.Errorf("first scrape: %+v", ct)
	}
	version.Store(1)
	d = scrape("", body)
	if ct := d.ChangeTracking; ct.ChangeStatus != "same" || ct.PreviousScrapeAt == nil || ct.Diff == nil || ct.Diff.Text != "" {
		t.Errorf("same page: %+v", ct)
	}
	version.Store(2)
	d = scrape("", body)
	ct := d.ChangeTracking
	if ct.ChangeStatus != "changed" || ct.Diff == nil || !strings.Contains(ct.Diff.Text, "-It costs 12 pounds") || !strings.Contains(ct.Diff.Text, "+It costs 15 pounds") {
		t.Fatalf("changed page: %+v", ct)
	}
	if f := ct.Diff.JSON.Files; len(f) != 1 || f[0].Additions != 1 || f[0].Deletions != 1 {
		t.Errorf("diff json: %+v", ct.Diff.JSON)
	}
	// Another account, or another tag: a history of its own.
	if d := scrape("acct_other", body); d.ChangeTracking.ChangeStatus != "new" {
		t.Errorf("another account: %+v", d.ChangeTracking)
	}
	tagged := strings.Replace(body, `"modes": ["git-diff"]`, `"tag": "nightly"`, 1)
	if d := scrape("", tagged); d.ChangeTracking.ChangeStatus != "new" {
		t.Errorf("another tag: %+v", d.ChangeTracking)
	}
	version.Store(3)
	if d := scrape("", body); d.ChangeTracking.ChangeStatus != "removed" {
		t.Errorf("gone: %+v", d.ChangeTracking)
	}
	// Refusals: without markdown, the json mode.
	for _, c := range []struct{ body, code string }{
		{`{"url": "` + site.URL + `/", "formats": [{"type": "changeTracking"}]}`, "BAD_REQUEST"},
		{`{"url": "` + site.URL + `/", "formats": ["markdown", {"type": "changeTracking", "modes": ["json"]}]}`, "UNSUPPORTED_FEATURE"},
		{`{"url": "` + site.URL + `/", "formats": ["markdown", {"type": "changeTracking", "modes": ["svn"]}]}`, "BAD_REQUEST"},
	} {
		resp, b := tc.do(t, "POST", "/v2/scrape", c.body, "", nil)
		if resp.StatusCode != 400 || !strings.Contains(string(b), c.code) {
			t.Errorf("%s: %d %s", c.body, resp.StatusCode, b)
		}
	}
}
