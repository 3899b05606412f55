package regiontest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/hooksecret"
	"github.com/trawlhq/trawl/internal/regionauth"
	"github.com/trawlhq/trawl/internal/testwait"
	"github.com/trawlhq/trawl/internal/webhook"
	"github.com/trawlhq/trawl/ledger"
)

// A batch scrape's webhook through a whole region: the gate charges and
// releases the batch, the cell asks the gate for the account's webhook
// secret (made on its first use, kept in the ledger), and the receiver
// verifies both signatures with the secret the account reads on GET
// /v1/billing/balance. After the account rotates it, the next batch is
// signed with the new one. The gate gives a secret only to a member of
// its region.
func TestFirecrawlWebhookSecretThroughGate(t *testing.T) {
	g := Start(t, Options{})
	pages := site(t)
	key := g.Account(t, ledger.PlanFree, 100)

	type post struct {
		header http.Header
		body   []byte
	}
	var mu sync.Mutex
	var posts []post
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		posts = append(posts, post{r.Header.Clone(), b})
		mu.Unlock()
	}))
	defer recv.Close()
	received := func() []post { mu.Lock(); defer mu.Unlock(); return append([]post(nil), posts...) }

	balance := func() (account, secret string) {
		t.Helper()
		r := call(t, "GET", g.URL+"/v1/billing/balance", key, "")
		var b struct {
			Account       string `json:"account"`
			WebhookSecret string `json:"webhook_secret"`
		}
		if r.status != 200 || json.Unmarshal([]byte(r.body), &b) != nil {
			t.Fatalf("balance: %d %s", r.status, r.body)
		}
		return b.Account, b.WebhookSecret
	}
	account, none := balance()
	if none != "" {
		t.Fatalf("a new account has a webhook secret %q", none)
	}
	batch := func(n int) post {
		t.Helper()
		body := `{"urls":["` + pages.URL + `/p` + string(rune('0'+n)) + `"],"webhook":{"url":"` + recv.URL + `","events":["completed"],"metadata":{"n":"` + string(rune('0'+n)) + `"}}}`
		r := call(t, "POST", g.URL+"/v2/batch/scrape", key, body)
		if r.status != 200 {
			t.Fatalf("batch scrape: %d %s", r.status, r.body)
		}
		var got []post
		if err := testwait.Poll(60*time.Second, func() bool { got = received(); return len(got) == n }); err != nil {
			t.Fatalf("%v: delivery %d (%d received)", err, n, len(got))
		}
		return got[n-1]
	}
	verify := func(p post, secret string) bool {
		return webhook.VerifyBody(secret, p.header.Get("X-Firecrawl-Signature"), p.body) &&
			webhook.Verify(secret, p.header.Get("X-Svc-Timestamp"), p.header.Get("X-Svc-Signature"), p.body, time.Now(), 5*time.Minute)
	}

	first := batch(1)
	_, s1 := balance()
	if !strings.HasPrefix(s1, "whsec_") || !verify(first, s1) {
		t.Fatalf("the first delivery is not signed with the account's secret %q: %v %s", s1, first.header, first.body)
	}
	if !strings.Contains(string(first.body), `"type":"batch_scrape.completed"`) || !strings.Contains(string(first.body), `"metadata":{"n":"1"}`) {
		t.Errorf("body %s", first.body)
	}

	r := call(t, "POST", g.URL+"/v1/billing/settings", key, `{"webhook_secret":"rotate"}`)
	var set struct {
		WebhookSecret string `json:"webhook_secret"`
	}
	if r.status != 200 || json.Unmarshal([]byte(r.body), &set) != nil || set.WebhookSecret == s1 || !strings.HasPrefix(set.WebhookSecret, "whsec_") {
		t.Fatalf("rotate: %d %s", r.status, r.body)
	}
	second := batch(2)
	if !verify(second, set.WebhookSecret) || verify(second, s1) {
		t.Fatalf("after the rotation the delivery is not signed with the new secret only: %v", second.header)
	}

	// A member of the region reads it; anyone else gets no signed answer.
	addr := strings.TrimPrefix(g.URL, "http://")
	member := &hooksecret.Client{Gate: regionauth.Gate{Keys: g.Runtime.RegionKeys(), Addr: func() string { return addr }}}
	if s, err := member.WebhookSecret(context.Background(), account); err != nil || s != set.WebhookSecret {
		t.Errorf("a member reads %q, %v", s, err)
	}
	if _, err := member.WebhookSecret(context.Background(), "acct_nobody"); !errors.Is(err, hooksecret.ErrNoAccount) {
		t.Errorf("an unknown account: %v", err)
	}
	other, _ := regionauth.ParseKeys(regionauth.NewKey())
	stranger := &hooksecret.Client{Gate: regionauth.Gate{Keys: other, Addr: func() string { return addr }}}
	if s, err := stranger.WebhookSecret(context.Background(), account); err == nil || s != "" {
		t.Errorf("a stranger read %q", s)
	}
	// The balance shows the new secret only.
	if _, s := balance(); s != set.WebhookSecret {
		t.Errorf("the balance shows %q after the rotation to %q", s, set.WebhookSecret)
	}
}
