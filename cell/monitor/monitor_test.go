package monitor

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/monstore"
	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/internal/testwait"
	"github.com/trawlhq/trawl/internal/webhook"
)

// clock is the injected clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// site serves one page whose HTML the test sets.
type site struct {
	*httptest.Server
	mu     sync.Mutex
	html   string
	status int
}

func newSite(t *testing.T, html string) *site {
	s := &site{html: html, status: 200}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(s.status)
		io.WriteString(w, s.html)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *site) set(html string, status int) {
	s.mu.Lock()
	s.html, s.status = html, status
	s.mu.Unlock()
}

var testClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// httpFetcher fetches with net/http and the content pipeline (the cell
// uses its engine ladder).
func httpFetcher() Fetcher {
	return FetcherFunc(func(ctx context.Context, raw, _ string) (*Page, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
		resp, err := testClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == 403 {
			return nil, ErrBlocked
		}
		if resp.StatusCode >= 400 {
			return nil, errors.New(resp.Status)
		}
		u, _ := url.Parse(raw)
		md, err := MainContent(body, u)
		if err != nil {
			return nil, err
		}
		return &Page{Markdown: md, Engine: metering.EngineHTTP}, nil
	})
}

// receiver records webhook POSTs; fail makes the first n answer 500.
type receiver struct {
	*httptest.Server
	mu   sync.Mutex
	got  []received
	fail atomic.Int32
}

type received struct {
	header http.Header
	body   []byte
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if rc.fail.Add(-1) >= 0 {
			w.WriteHeader(500)
			return
		}
		rc.mu.Lock()
		rc.got = append(rc.got, received{r.Header.Clone(), body})
		rc.mu.Unlock()
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) all() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

const shopV1 = `<html><head><title>Shop</title></head><body><nav><a href="/">Home</a> v1.0.1</nav><main><article>
<h1>Shop</h1><p>Our products and prices, updated every day by the shop team for you.</p>
<h2>Prices</h2><table><thead><tr><th>Product</th><th>Price</th></tr></thead>
<tbody><tr><td>Widget</td><td>50</td></tr><tr><td>Gadget</td><td>20</td></tr></tbody></table>
<p>All prices include tax and are shown in euros. Shipping is free over 100 euros.</p>
</article></main><footer>Rendered at 10:00:01</footer></body></html>`

func shop(price string) string {
	return strings.Replace(shopV1, "<td>50</td>", "<td>"+price+"</td>", 1)
}

type env struct {
	t     *testing.T
	clock *clock
	svc   *Service
	st    *store.Store
	dir   string
	stop  func()
}

func newEnv(t *testing.T, dir string, adjust func(*Config)) *env {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	st, err := store.Open(filepath.Join(dir, "store"), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{now: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)}
	cfg := Config{Region: "eu", Cell: "c1", AllowPrivateNetworks: true, Fetcher: httpFetcher(), Now: c.Now}
	if adjust != nil {
		adjust(&cfg)
	}
	svc, err := New(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		if svc.hooks != nil {
			svc.hooks.Run(ctx)
		}
		close(done)
	}()
	e := &env{t: t, clock: c, svc: svc, st: st, dir: dir}
	e.stop = func() { cancel(); <-done; svc.Close(); st.Close() }
	t.Cleanup(func() {
		if e.stop != nil {
			e.stop()
		}
	})
	return e
}

func (e *env) close() { e.stop(); e.stop = nil }

// advance moves the clock, runs the due checks and kicks the sender.
func (e *env) advance(d time.Duration) {
	e.clock.Add(d)
	e.svc.Tick(context.Background())
	e.svc.Kick()
}

func (e *env) events(id string) []*Event {
	e.t.Helper()
	evs, err := e.svc.Events(context.Background(), "acct1", id, time.Time{}, 500)
	if err != nil {
		e.t.Fatal(err)
	}
	return evs
}

func str(s string) *string { return &s }

var ctx0 = context.Background()

func TestChangeConfirmedChargedDelivered(t *testing.T) {
	e := newEnv(t, "", nil)
	s := newSite(t, shop("50"))
	rc := newReceiver(t)
	v, err := e.svc.Create(context.Background(), "acct1", &Request{URL: str(s.URL + "/shop"), Watch: str("Tell me when the price drops below 48"),
		Every: str("1h"), Notify: &Notify{Webhook: rc.URL, Secret: "s3cret"}})
	if err != nil {
		t.Fatal(err)
	}
	if !v.Created || v.Baseline.Status != "pending" || len(v.Conditions.Any) != 1 || v.Cost.PerChangeCredits != 3 {
		t.Fatalf("created %+v", v)
	}
	e.advance(time.Second) // baseline
	got, _ := e.svc.Get(ctx0, "acct1", v.ID)
	if got.Baseline.Status != "ok" || got.Baseline.Version == "" {
		t.Fatalf("baseline %+v", got.Baseline)
	}
	// Only the footer's time and the nav changed: nothing.
	s.set(strings.Replace(shop("50"), "10:00:01", "10:05:09", 1), 200)
	e.advance(time.Hour)
	if evs := e.events(v.ID); len(evs) != 0 {
		t.Fatalf("events on a page whose content did not change: %+v", evs)
	}
	s.set(shop("45"), 200)
	e.advance(time.Hour)
	evs := e.events(v.ID)
	if len(evs) != 1 || evs[0].ConfirmedAt != nil || len(evs[0].Matched) != 1 || evs[0].Matched[0] != "c1" {
		t.Fatalf("first sight: %+v", evs)
	}
	f := evs[0].Facts
	if len(f) != 1 || f[0].Kind != "changed" || f[0].Entity != "Widget" || f[0].Field != "Price" || f[0].Before != "50" || f[0].After != "45" {
		t.Fatalf("facts %+v", f)
	}
	if len(rc.all()) != 0 {
		t.Fatal("delivered before confirmation")
	}
	e.advance(DefaultConfirmAfter)
	evs = e.events(v.ID)
	if evs[0].ConfirmedAt == nil || evs[0].CostCredits != 3 {
		t.Fatalf("not confirmed: %+v", evs[0])
	}
	testwait.Until(t, 10*time.Second, "the webhook", func() bool { return len(rc.all()) == 1 })
	r := rc.all()[0]
	if r.header.Get("x-svc-event") != "change" || r.header.Get("x-svc-monitor") != v.ID {
		t.Fatalf("headers %v", r.header)
	}
	if !webhook.Verify("s3cret", r.header.Get("x-svc-timestamp"), r.header.Get("x-svc-signature"), r.body, e.clock.Now(), 5*time.Minute) {
		t.Fatal("signature does not verify")
	}
	var body Event
	if err := json.Unmarshal(r.body, &body); err != nil || body.Summary == "" || body.Evidence.After == body.Evidence.Before {
		t.Fatalf("body %s: %v", r.body, err)
	}
	testwait.Until(t, 10*time.Second, "delivery recorded", func() bool {
		d := e.events(v.ID)[0].Delivery
		return d.Done && d.Webhook.Status == "delivered" && d.Webhook.Attempts == 1
	})

	// The versions behind the evidence.
	after := strings.TrimPrefix(body.Evidence.After, "/monitors/"+v.ID+"/versions/")
	md, err := e.svc.Version(ctx0, "acct1", v.ID, after)
	if err != nil || !strings.Contains(md, "45") {
		t.Fatalf("version %q: %v", md, err)
	}
	// Billing: one check per hour window, 3 for the change.
	charges, _ := e.svc.Charges(ctx0, 100)
	var checks, changes int
	for _, c := range charges {
		switch c.Usage.Kind {
		case metering.KindMonitorCheck:
			checks++
		case metering.KindMonitorChange:
			changes++
		}
	}
	if changes != 1 || checks != 3 {
		t.Fatalf("charges: %d checks, %d changes: %+v", checks, changes, charges)
	}
	// Another account sees nothing.
	if _, err := e.svc.Get(ctx0, "acct2", v.ID); err != ErrNoMonitor {
		t.Fatalf("other account: %v", err)
	}
	if _, err := e.svc.Version(ctx0, "acct1", v.ID, "nope"); err != ErrNoVersion {
		t.Fatalf("bad version: %v", err)
	}
}

func TestRevertedChangeNeverDelivered(t *testing.T) {
	e := newEnv(t, "", nil)
	s := newSite(t, shop("50"))
	rc := newReceiver(t)
	v, err := e.svc.Create(context.Background(), "acct1", &Request{URL: str(s.URL), Every: str("1h"), Notify: &Notify{Webhook: rc.URL}})
	if err != nil {
		t.Fatal(err)
	}
	e.advance(time.Second)
	s.set(shop("45"), 200)
	e.advance(time.Hour)
	if evs := e.events(v.ID); len(evs) != 1 || len(evs[0].Matched) != 0 {
		t.Fatalf("first sight: %+v", evs)
	}
	s.set(shop("50"), 200)
	e.advance(DefaultConfirmAfter)
	e.advance(time.Hour)
	if evs := e.events(v.ID); len(evs) != 0 {
		t.Fatalf("a reverted change stayed: %+v", evs)
	}
	if len(rc.all()) != 0 {
		t.Fatal("a reverted change was delivered")
	}
	charges, _ := e.svc.Charges(ctx0, 100)
	for _, c := range charges {
		if c.Usage.Kind != metering.KindMonitorCheck {
			t.Fatalf("charged %+v", c)
		}
	}
}

func TestReceiverDownTwiceThenUp(t *testing.T) {
	e := newEnv(t, "", nil)
	s := newSite(t, shop("50"))
	rc := newReceiver(t)
	rc.fail.Store(2)
	v, _ := e.svc.Create(context.Background(), "acct1", &Request{URL: str(s.URL), Every: str("4m"), Notify: &Notify{Webhook: rc.URL}})
	e.advance(time.Second)
	s.set(shop("45"), 200)
	e.advance(4 * time.Minute)
	e.advance(DefaultConfirmAfter)
	testwait.Until(t, 10*time.Second, "first attempt", func() bool { return e.events(v.ID)[0].Delivery.Webhook.Attempts == 1 })
	e.advance(time.Minute)
	testwait.Until(t, 10*time.Second, "second attempt", func() bool { return e.events(v.ID)[0].Delivery.Webhook.Attempts == 2 })
	e.advance(5 * time.Minute)
	testwait.Until(t, 10*time.Second, "delivered", func() bool {
		d := e.events(v.ID)[0].Delivery
		return d.Done && d.Webhook.Status == "delivered"
	})

	if d := e.events(v.ID)[0].Delivery.Webhook; d.Attempts != 3 {
		t.Fatalf("attempts %d", d.Attempts)
	}
	if n := len(rc.all()); n != 1 {
		t.Fatalf("%d deliveries", n)
	}
}

func TestHealthEvents(t *testing.T) {
	e := newEnv(t, "", nil)
	s := newSite(t, shop("50"))
	v, _ := e.svc.Create(context.Background(), "acct1", &Request{URL: str(s.URL), Every: str("1h")})
	e.advance(time.Second)
	s.set("blocked", 403)
	for range 3 {
		e.advance(time.Hour)
	}
	evs := e.events(v.ID)
	if len(evs) != 1 || evs[0].Event != "health" || evs[0].Health != "blocked" {
		t.Fatalf("events %+v", evs)
	}
	if g, _ := e.svc.Get(ctx0, "acct1", v.ID); g.Health != "blocked" {
		t.Fatalf("health %q", g.Health)
	}
	before, _ := e.svc.Charges(ctx0, 100)
	s.set(shop("50"), 200)
	e.advance(time.Hour)
	evs = e.events(v.ID)
	if len(evs) != 2 || evs[1].Health != "ok" {
		t.Fatalf("events %+v", evs)
	}
	raw, _ := json.Marshal(evs[1])
	if strings.Contains(string(raw), "facts") {
		t.Fatalf("health event %s", raw)
	}
	after, _ := e.svc.Charges(ctx0, 100)
	if len(after) != len(before)+1 {
		t.Fatalf("refused checks were charged: %d → %d", len(before), len(after))
	}
}

func TestRefusals(t *testing.T) {
	e := newEnv(t, "", func(c *Config) {
		c.AllowPrivateNetworks = false
		c.Limits = Limits{Account: 2, Fast: 1, Host: 3}
	})
	ctx := context.Background()
	cases := []struct {
		req  Request
		want string
	}{
		{Request{URL: str("not a url")}, "url is not valid"},
		{Request{}, "url is not valid"},
		{Request{URL: str("ftp://example.com/")}, "url must start with http:// or https://"},
		{Request{URL: str("http://127.0.0.1/")}, "url host is not public"},
		{Request{URL: str("http://localhost/")}, "url host is not public"},
		{Request{URL: str("https://example.com/"), Every: str("3m")}, "every must be at least 4m"},
		{Request{URL: str("https://example.com/"), Every: str("soon")}, "every must be one of 4m, 15m, 1h, 6h, 1d, 1w or a duration such as 30m"},
		{Request{URL: str("https://example.com/"), Notify: &Notify{Webhook: "http://10.0.0.1/hook"}}, "notify.webhook: url host is not public"},
		{Request{URL: str("https://example.com/"), Schema: json.RawMessage(`[1]`)}, "schema must be a JSON object"},
	}
	for _, c := range cases {
		_, err := e.svc.Create(ctx, "acct1", &c.req)
		var me *httpjson.HTTPError
		if !errors.As(err, &me) || me.Message != c.want || me.Status != 400 {
			t.Errorf("%+v: %v, want 400 %q", c.req, err, c.want)
		}
	}
	if l, _ := e.svc.List(ctx0, "acct1"); len(l) != 0 {
		t.Fatalf("refusals created %d monitors", len(l))
	}
	a, err := e.svc.Create(ctx, "acct1", &Request{URL: str("https://example.com/a"), Every: str("15m")})
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Add(time.Second) // newest first
	if again, err := e.svc.Create(ctx, "acct1", &Request{URL: str("https://example.com/a"), Every: str("1d")}); err != nil || again.Created || again.ID != a.ID {
		t.Fatalf("again: %+v %v", again, err)
	}
	if _, err := e.svc.Create(ctx, "acct1", &Request{URL: str("https://example.com/b"), Every: str("15m")}); err == nil || err.Error() != "at most 1 running monitors checked more often than every 1h per account" {
		t.Fatalf("fast limit: %v", err)
	}
	if _, err := e.svc.Create(ctx, "acct1", &Request{URL: str("https://example.com/b")}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Create(ctx, "acct1", &Request{URL: str("https://example.com/c")}); err == nil || err.Error() != "at most 2 monitors per account" {
		t.Fatalf("account limit: %v", err)
	}
	if _, err := e.svc.Create(ctx, "acct2", &Request{URL: str("https://example.com/d")}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Create(ctx, "acct3", &Request{URL: str("https://example.com/e")}); err == nil || err.Error() != "this site has too many monitors already" {
		t.Fatalf("host limit: %v", err)
	}
	l, _ := e.svc.List(ctx0, "acct1")
	if len(l) != 2 || l[0].URL != "https://example.com/b" {
		t.Fatalf("list %+v", l)
	}
	// PATCH checks everything before changing anything.
	if _, err := e.svc.Patch(ctx, "acct1", a.ID, &Request{Name: str("x"), Every: str("1m")}); err == nil {
		t.Fatal("patch with a bad every")
	}
	if g, _ := e.svc.Get(ctx0, "acct1", a.ID); g.Name != "" {
		t.Fatal("a refused patch changed the name")
	}
	p, err := e.svc.Patch(ctx, "acct1", a.ID, &Request{Paused: new(true), Watch: str("price below 10")})
	if err != nil || !p.Paused || len(p.Conditions.Any) != 1 {
		t.Fatalf("patch %+v %v", p, err)
	}
	if _, err := e.svc.Patch(ctx, "acct2", a.ID, &Request{Name: str("x")}); err != ErrNoMonitor {
		t.Fatalf("other account's patch: %v", err)
	}
	if err := e.svc.Delete(ctx0, "acct2", a.ID); err != ErrNoMonitor {
		t.Fatalf("other account's delete: %v", err)
	}
	if err := e.svc.Delete(ctx0, "acct1", a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Get(ctx0, "acct1", a.ID); err != ErrNoMonitor {
		t.Fatalf("after delete: %v", err)
	}
}

// A confirmed change whose delivery is pending survives a restart and is
// delivered once.
func TestDeliverySurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, dir, nil)
	s := newSite(t, shop("50"))
	rc := newReceiver(t)
	rc.fail.Store(1)
	v, _ := e.svc.Create(context.Background(), "acct1", &Request{URL: str(s.URL), Every: str("1h"), Notify: &Notify{Webhook: rc.URL}})
	e.advance(time.Second)
	s.set(shop("45"), 200)
	e.advance(time.Hour)
	e.advance(DefaultConfirmAfter)
	testwait.Until(t, 10*time.Second, "first attempt", func() bool { return e.events(v.ID)[0].Delivery.Webhook.Attempts == 1 })
	now := e.clock.Now()
	e.close()

	e2 := newEnv(t, dir, nil)
	e2.clock.Add(now.Sub(e2.clock.Now()))
	e2.advance(time.Minute)
	testwait.Until(t, 10*time.Second, "delivered after the restart", func() bool {
		d := e2.events(v.ID)[0].Delivery
		return d.Done && d.Webhook.Status == "delivered"
	})

	if n := len(rc.all()); n != 1 {
		t.Fatalf("%d deliveries", n)
	}
}

// A confirmed change whose webhook the sender would refuse by the time it
// is confirmed (private networks no longer allowed) is recorded as failed
// on the event, and nothing is sent.
func TestRefusedDeliveryRecorded(t *testing.T) {
	e := newEnv(t, "", nil)
	s := newSite(t, shop("50"))
	rc := newReceiver(t)
	v, _ := e.svc.Create(context.Background(), "acct1", &Request{URL: str(s.URL), Every: str("1h"), Notify: &Notify{Webhook: rc.URL}})
	e.advance(time.Second)
	s.set(shop("45"), 200)
	e.advance(time.Hour)
	e.svc.cfg.AllowPrivateNetworks = false
	e.svc.cfg.Fetcher = httpFetcher() // the page itself is still fetched
	e.advance(DefaultConfirmAfter)
	d := e.events(v.ID)[0].Delivery
	if !d.Done || d.Webhook == nil || d.Webhook.Status != "failed" {
		t.Fatalf("delivery %+v", d)
	}
	if len(rc.all()) != 0 {
		t.Fatal("a refused delivery was sent")
	}
}

// notify.email without a mail server: the change is confirmed and its
// mail recorded as failed, never as sent; with webhook and email both,
// the delivery is done when both are.
func TestEmailWithoutMailer(t *testing.T) {
	e := newEnv(t, "", nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.svc.local.RunMail(ctx, monstoreMailConfig(e)); close(done) }()
	defer func() { cancel(); <-done }()
	s := newSite(t, shop("50"))
	rc := newReceiver(t)
	v, _ := e.svc.Create(ctx0, "acct1", &Request{URL: str(s.URL), Every: str("1h"), Notify: &Notify{Webhook: rc.URL, Email: "a@example.com"}})
	e.advance(time.Second)
	s.set(shop("45"), 200)
	e.advance(time.Hour)
	if d := e.events(v.ID)[0].Delivery; d.Email == nil || d.Email.Status != "waiting for confirmation" || d.Done {
		t.Fatalf("first sight %+v", d)
	}
	e.advance(DefaultConfirmAfter)
	testwait.Until(t, 10*time.Second, "both channels finished", func() bool {
		d := e.events(v.ID)[0].Delivery
		return d.Done && d.Email != nil && d.Email.Status == "failed" && d.Webhook.Status == "delivered"
	})

}

func monstoreMailConfig(e *env) monstore.MailConfig {
	return monstore.MailConfig{Now: e.clock.Now}
}
