package cell

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/testwait"
	"github.com/trawlhq/trawl/internal/webhook"
)

// testHookSecret is the test account's webhook secret, as the region's
// gate would give it.
const testHookSecret = "whsec_0123456789abcdef0123456789abcdef"

// hookSecrets is the region's gate for the tests: each account's secret.
type hookSecrets map[string]string

func (h hookSecrets) WebhookSecret(_ context.Context, account string) (string, error) {
	if s, ok := h[account]; ok {
		return s, nil
	}
	return "", errors.New("no gate answered")
}

func withHookSecrets(c *Config) { c.WebhookSecrets = hookSecrets{testAccount: testHookSecret} }

// hookReceiver is a webhook receiver on loopback: it records each post
// and answers with answer's status (n counts the posts, from 1).
type hookReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []hookPost
	answer func(n int) int
}

type hookPost struct {
	path   string
	header http.Header
	raw    []byte
	body   hookBody
}

// hookBody is Firecrawl's webhook body.
type hookBody struct {
	Success   bool              `json:"success"`
	Type      string            `json:"type"`
	ID        string            `json:"id"`
	WebhookID string            `json:"webhookId"`
	Data      []v2Doc           `json:"data"`
	Error     *string           `json:"error"`
	Metadata  map[string]string `json:"metadata"`
}

func newHookReceiver(t *testing.T, answer func(n int) int) *hookReceiver {
	h := &hookReceiver{answer: answer}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var b hookBody
		if err := json.Unmarshal(raw, &b); err != nil {
			t.Errorf("a delivery that is not Firecrawl's body: %s", raw)
		}
		h.mu.Lock()
		h.got = append(h.got, hookPost{r.URL.Path, r.Header.Clone(), raw, b})
		n := len(h.got)
		h.mu.Unlock()
		w.WriteHeader(h.answer(n))
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookReceiver) posts() []hookPost {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.got)
}

func (h *hookReceiver) types() []string {
	var out []string
	for _, p := range h.posts() {
		out = append(out, p.body.Type)
	}
	return out
}

// waitHooks waits until cond holds of the receiver, kicking the cell's
// sender before each look (its real timer is only a backstop).
func (tc *testCell) waitHooks(t *testing.T, h *hookReceiver, what string, cond func([]hookPost) bool) []hookPost {
	t.Helper()
	var got []hookPost
	if err := testwait.Poll(60*time.Second, func() bool {
		tc.v2Hooks.Kick()
		got = h.posts()
		return cond(got)
	}); err != nil {
		p, _ := tc.v2Hooks.Pending()
		t.Fatalf("%v: %s; received %v; pending %d", err, what, h.types(), len(p))
	}
	return got
}

// pendingHooks is how many deliveries the cell has not finished.
func (tc *testCell) pendingHooks(t *testing.T) int {
	t.Helper()
	p, err := tc.v2Hooks.Pending()
	if err != nil {
		t.Fatal(err)
	}
	return len(p)
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// checkSigned checks a delivery is signed both ways with the account's
// secret, and carries trawl's headers.
func (tc *testCell) checkSigned(t *testing.T, p hookPost) {
	t.Helper()
	h := p.header
	if sig := h.Get("X-Firecrawl-Signature"); !webhook.VerifyBody(testHookSecret, sig, p.raw) {
		t.Errorf("%s: X-Firecrawl-Signature %q does not verify over the raw body", p.body.Type, sig)
	}
	now := time.Unix(0, tc.now.Load())
	if !webhook.Verify(testHookSecret, h.Get("X-Svc-Timestamp"), h.Get("X-Svc-Signature"), p.raw, now, 5*time.Minute) {
		t.Errorf("%s: x-svc-signature %q (timestamp %q) does not verify", p.body.Type, h.Get("X-Svc-Signature"), h.Get("X-Svc-Timestamp"))
	}
	if webhook.VerifyBody("whsec_another_secret_entirely", h.Get("X-Firecrawl-Signature"), p.raw) {
		t.Error("another secret verifies")
	}
	if h.Get("Content-Type") != "application/json" || h.Get("X-Svc-Event") != p.body.Type || h.Get("X-Svc-Delivery") != p.body.WebhookID {
		t.Errorf("%s: headers %v", p.body.Type, h)
	}
	if !uuidRE.MatchString(p.body.WebhookID) {
		t.Errorf("webhookId %q is not a UUID", p.body.WebhookID)
	}
}

// A batch scrape with a webhook: once the gate releases it, started, one
// page event per URL (the document; a failed URL's sourceURL and error)
// and completed, each signed with the account's secret both ways, with
// the webhook's headers and its metadata echoed.
func TestV2BatchWebhooks(t *testing.T) {
	site := newBatchSite(t)
	tc := newTestCell(t, withHookSecrets)
	rc := newHookReceiver(t, func(int) int { return 200 })
	body, _ := json.Marshal(map[string]any{
		"urls": []string{site.URL + "/a", site.URL + "/pdf"}, "formats": []string{"markdown"},
		"webhook": map[string]any{"url": rc.URL + "/hook", "headers": map[string]string{"X-Receiver-Token": "tok"},
			"metadata": map[string]string{"run": "42"}},
	})
	resp, r, _ := tc.startBatch(t, string(body))
	if resp.StatusCode != 200 || !r.Success {
		t.Fatalf("start: %d %+v", resp.StatusCode, r)
	}
	// Held: nothing has happened yet, so nothing is sent.
	tc.v2Hooks.Kick()
	if n := tc.pendingHooks(t); n != 0 || len(rc.posts()) != 0 {
		t.Fatalf("a held batch has %d deliveries pending, %d sent", n, len(rc.posts()))
	}
	tc.release(t, resp)
	got := tc.waitHooks(t, rc, "started, two pages, completed", func(p []hookPost) bool { return len(p) >= 4 })
	byType := map[string][]hookPost{}
	ids := map[string]bool{}
	for _, p := range got {
		byType[p.body.Type] = append(byType[p.body.Type], p)
		tc.checkSigned(t, p)
		ids[p.body.WebhookID] = true
		if p.path != "/hook" || p.header.Get("X-Receiver-Token") != "tok" || p.body.ID != r.ID || p.body.Metadata["run"] != "42" || len(p.body.Metadata) != 1 {
			t.Errorf("%s: path %s, token %q, id %q, metadata %v", p.body.Type, p.path, p.header.Get("X-Receiver-Token"), p.body.ID, p.body.Metadata)
		}
	}
	if len(got) != 4 || len(ids) != 4 || len(byType["batch_scrape.started"]) != 1 || len(byType["batch_scrape.page"]) != 2 || len(byType["batch_scrape.completed"]) != 1 {
		t.Fatalf("deliveries %v (%d distinct webhookIds)", rc.types(), len(ids))
	}
	// One at a time, in the order of the events.
	if types := rc.types(); types[0] != "batch_scrape.started" || types[3] != "batch_scrape.completed" {
		t.Errorf("deliveries arrived as %v", types)
	}
	for _, typ := range []string{"batch_scrape.started", "batch_scrape.completed"} {
		p := byType[typ][0]
		if !p.body.Success || len(p.body.Data) != 0 || p.body.Error != nil || !strings.Contains(string(p.raw), `"data":[]`) {
			t.Errorf("%s: %s", typ, p.raw)
		}
	}
	pages := map[string]hookBody{}
	for _, p := range byType["batch_scrape.page"] {
		if len(p.body.Data) != 1 {
			t.Fatalf("a page event with %d documents: %s", len(p.body.Data), p.raw)
		}
		pages[p.body.Data[0].Metadata["sourceURL"].(string)] = p.body
	}
	if a := pages[site.URL+"/a"]; !a.Success || a.Error != nil || a.Data[0].Markdown == nil || !strings.Contains(*a.Data[0].Markdown, "copper kettle") {
		t.Errorf("the page's event: %+v", a)
	}
	if f := pages[site.URL+"/pdf"]; f.Success || f.Error == nil || *f.Error == "" || f.Data[0].Markdown != nil {
		t.Errorf("the failed URL's event: %+v", f)
	}
	// Every delivery was taken: nothing is left to send, nothing more comes.
	testwait.Until(t, 30*time.Second, "nothing pending", func() bool { return tc.pendingHooks(t) == 0 })
	if n := len(rc.posts()); n != 4 {
		t.Errorf("%d deliveries, want 4", n)
	}
}

// Cancelling a batch sends one cancelled event, none for the URLs it
// kept from running nor for the one in flight that finishes; a webhook
// that asks only for completed gets nothing of it, one that asks for
// failed gets the cancel.
func TestV2BatchWebhookCancel(t *testing.T) {
	for _, tt := range []struct {
		name   string
		events []string
		want   []string
	}{
		{"all events", nil, []string{"batch_scrape.started", "batch_scrape.cancelled"}},
		{"completed only", []string{"completed"}, nil},
		{"failed", []string{"failed"}, []string{"batch_scrape.cancelled"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			site := newBatchSite(t)
			tc := newTestCell(t, withHookSecrets)
			rc := newHookReceiver(t, func(int) int { return 200 })
			urls := []string{site.URL + "/slow"}
			for _, p := range []string{"/a", "/b", "/c", "/d", "/e"} {
				urls = append(urls, site.URL+p)
			}
			hook := map[string]any{"url": rc.URL}
			if tt.events != nil {
				hook["events"] = tt.events
			}
			body, _ := json.Marshal(map[string]any{"urls": urls, "maxConcurrency": 1, "webhook": hook})
			resp, r, _ := tc.startBatch(t, string(body))
			if resp.StatusCode != 200 {
				t.Fatalf("start: %d %+v", resp.StatusCode, r)
			}
			tc.release(t, resp)
			testwait.Until(t, 30*time.Second, "the slow page in flight", func() bool { return site.slow.Load() == 1 })
			if resp, b := tc.do(t, "DELETE", "/v2/batch/scrape/"+r.ID, "", "", nil); resp.StatusCode != 200 {
				t.Fatalf("cancel: %d %s", resp.StatusCode, b)
			}
			// The page in flight finishes and keeps its document.
			site.open()
			tc.waitBatch(t, r.ID, func(s batchStatus) bool { return s.Status == "cancelled" && s.Completed == 1 })
			testwait.Until(t, 30*time.Second, "every delivery sent", func() bool { tc.v2Hooks.Kick(); return tc.pendingHooks(t) == 0 })
			got := rc.types()
			slices.Sort(got)
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("deliveries %v, want %v", got, want)
			}
			for _, p := range rc.posts() {
				tc.checkSigned(t, p)
				if p.body.Type == "batch_scrape.cancelled" && (p.body.Success || p.body.Error == nil || *p.body.Error != "the batch scrape was cancelled" || len(p.body.Data) != 0) {
					t.Errorf("cancelled: %s", p.raw)
				}
			}
		})
	}
}

// A receiver that fails is tried again on the retry ladder (1 minute
// first, on the cell's clock): the same delivery, id, body and
// signature, its attempt counted.
func TestV2BatchWebhookRetry(t *testing.T) {
	site := newBatchSite(t)
	tc := newTestCell(t, withHookSecrets)
	rc := newHookReceiver(t, func(n int) int {
		if n == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	body, _ := json.Marshal(map[string]any{"urls": []string{site.URL + "/a"}, "webhook": map[string]any{"url": rc.URL, "events": []string{"completed"}}})
	resp, r, _ := tc.startBatch(t, string(body))
	if resp.StatusCode != 200 {
		t.Fatalf("start: %d %+v", resp.StatusCode, r)
	}
	tc.release(t, resp)
	tc.waitHooks(t, rc, "the first attempt", func(p []hookPost) bool { return len(p) == 1 })
	testwait.Until(t, 30*time.Second, "the failure recorded", func() bool {
		p, _ := tc.v2Hooks.Pending()
		return len(p) == 1 && p[0].Attempts == 1
	})
	// Not before its time.
	tc.advance(time.Minute - time.Second)
	tc.v2Hooks.Kick()
	if p, _ := tc.v2Hooks.Pending(); len(p) != 1 || len(rc.posts()) != 1 {
		t.Fatalf("retried early: %d posts", len(rc.posts()))
	}
	tc.advance(time.Second)
	got := tc.waitHooks(t, rc, "the retry", func(p []hookPost) bool { return len(p) == 2 })
	first, second := got[0], got[1]
	if second.body.Type != "batch_scrape.completed" || string(second.raw) != string(first.raw) || second.body.WebhookID != first.body.WebhookID ||
		second.header.Get("X-Svc-Delivery") != first.header.Get("X-Svc-Delivery") || second.header.Get("X-Svc-Attempt") != "2" ||
		second.header.Get("X-Firecrawl-Signature") != first.header.Get("X-Firecrawl-Signature") {
		t.Errorf("the retry is not the same delivery:\n%s %v\n%s %v", first.raw, first.header, second.raw, second.header)
	}
	tc.checkSigned(t, second)
	testwait.Until(t, 30*time.Second, "nothing pending", func() bool { return tc.pendingHooks(t) == 0 })
}

// Webhooks the cell refuses, in Firecrawl's envelope, and a cell whose
// gate does not answer: no job is made.
func TestV2BatchWebhookRefusals(t *testing.T) {
	tc := newTestCell(t, withHookSecrets)
	ok := `"urls":["http://a.example/"]`
	for _, tt := range []struct {
		name, webhook, code, path string
	}{
		{"not http", `"ftp://hooks.example/x"`, "BAD_REQUEST", "webhook.url"},
		{"not a URL", `"hooks"`, "BAD_REQUEST", "webhook.url"},
		{"no url", `{"events":["page"]}`, "BAD_REQUEST", "webhook.url"},
		{"a number", `42`, "BAD_REQUEST", "webhook"},
		{"unknown key", `{"url":"https://hooks.example/x","evnets":["page"]}`, "BAD_REQUEST", "webhook"},
		{"unknown event", `{"url":"https://hooks.example/x","events":["page","finished"]}`, "BAD_REQUEST", "webhook.events.1"},
		{"events not a list", `{"url":"https://hooks.example/x","events":"page"}`, "BAD_REQUEST", "webhook.events"},
		{"metadata not strings", `{"url":"https://hooks.example/x","metadata":{"n":1}}`, "BAD_REQUEST", "webhook.metadata"},
		{"the signature's header", `{"url":"https://hooks.example/x","headers":{"x-firecrawl-signature":"mine"}}`, "BAD_REQUEST", "webhook.headers"},
		{"trawl's header", `{"url":"https://hooks.example/x","headers":{"X-Svc-Signature":"mine"}}`, "BAD_REQUEST", "webhook.headers"},
		{"a transport header", `{"url":"https://hooks.example/x","headers":{"Content-Type":"text/plain"}}`, "BAD_REQUEST", "webhook.headers"},
		{"too many headers", `{"url":"https://hooks.example/x","headers":{` + manyHeaders(20) + `}}`, "BAD_REQUEST", "webhook.headers"},
		{"metadata too large", `{"url":"https://hooks.example/x","metadata":{"m":"` + strings.Repeat("x", 17<<10) + `"}}`, "BAD_REQUEST", "webhook.metadata"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := tc.do(t, "POST", "/v2/batch/scrape", `{`+ok+`,"webhook":`+tt.webhook+`}`, "", nil)
			r := decode[batchStarted](t, b)
			if resp.StatusCode != 400 || r.Code != tt.code || r.Error == "" {
				t.Fatalf("%d %s, want 400 %s", resp.StatusCode, b, tt.code)
			}
			if len(r.Details) == 0 || strings.Join(r.Details[0].Path, ".") != tt.path {
				t.Errorf("details %s, want the path %s", b, tt.path)
			}
		})
	}
	// The gate does not answer for this account: 503, nothing started.
	resp, b := tc.do(t, "POST", "/v2/batch/scrape", `{`+ok+`,"webhook":"https://hooks.example/x"}`, "acct_nogate", nil)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || resp.Header.Get(metering.Header) != "" {
		t.Errorf("without the gate's secret: %d %v %s", resp.StatusCode, resp.Header, b)
	}
	// A cell without a gate at all refuses webhooks the same way.
	bare := newTestCell(t, nil)
	if resp, b := bare.do(t, "POST", "/v2/batch/scrape", `{`+ok+`,"webhook":"https://hooks.example/x"}`, "", nil); resp.StatusCode != 503 {
		t.Errorf("a cell without a gate: %d %s", resp.StatusCode, b)
	}
	n := 0
	tc.store.Scan([]byte("ji/"), nil, func(_, _ []byte) (bool, error) { n++; return true, nil })
	if n != 0 {
		t.Fatalf("%d jobs stored after refusals", n)
	}
}

func manyHeaders(n int) string {
	var parts []string
	for i := range n {
		parts = append(parts, `"X-H`+strings.Repeat("a", i+1)+`":"v"`)
	}
	return strings.Join(parts, ",")
}
