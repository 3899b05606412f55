package webhook

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/internal/testwait"
	"github.com/trawlhq/trawl/internal/urlpolicy"
)

const testPrefix = store.PrefixCrawlWebhook

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// receiver records what it was sent and answers with the status its
// answer function gives.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []received
	answer func(n int) int
}

type received struct {
	header http.Header
	body   []byte
}

func newReceiver(t *testing.T, answer func(n int) int) *receiver {
	r := &receiver{answer: answer}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, received{req.Header.Clone(), b})
		n := len(r.got)
		r.mu.Unlock()
		w.WriteHeader(r.answer(n))
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) count() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.got) }
func (r *receiver) last() received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[len(r.got)-1]
}

// deliveryWait bounds a wait for a delivery. Generous: under a loaded CI
// machine (race detector, every package at once) one loopback delivery
// took longer than 10 s.
const deliveryWait = 30 * time.Second

// waitKicking waits for a delivery due on the fake clock: Run's real
// timer is only a backstop (up to a minute, longer than the wait), so the
// test kicks the sender before each look, as the timer would.
func waitKicking(t *testing.T, s *Sender, what string, cond func() bool) {
	t.Helper()
	if err := testwait.Poll(deliveryWait, func() bool { s.Kick(); return cond() }); err != nil {
		p, perr := s.Pending()
		t.Fatalf("%v: %s; pending: %+v %v", err, what, p, perr)
	}
}

func openStore(t *testing.T, dir string) *store.Store {
	st, err := store.Open(dir, &store.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// start runs a sender on st; the returned stop ends Run and waits for it.
func start(t *testing.T, st *store.Store, cfg Config) (*Sender, func()) {
	t.Helper()
	cfg.Prefix = testPrefix
	cfg.AllowPrivateNetworks = true
	cfg.Logger = slog.New(slog.DiscardHandler)
	if cfg.Timeout == 0 {
		// As long as a wait of the tests: a loopback delivery on a loaded
		// CI machine once took over 10 s (the default), and a timed-out
		// attempt is retried minutes later on the fake clock.
		cfg.Timeout = 30 * time.Second
	}
	s, err := New(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done; s.Close() }) }
	t.Cleanup(stop)
	return s, stop
}

func TestSignedDelivery(t *testing.T) {
	rc := newReceiver(t, func(int) int { return 204 })
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	var finished []Delivery
	var mu sync.Mutex
	st := openStore(t, t.TempDir())
	t.Cleanup(func() { st.Close() })
	s, _ := start(t, st, Config{Now: clk.Now, OnFinish: func(d Delivery) { mu.Lock(); finished = append(finished, d); mu.Unlock() }})
	body := []byte(`{"task_id":"t1","status":"completed"}`)
	id, err := s.Send(Delivery{URL: rc.URL + "/hook?k=v", Event: "crawl.task", Secret: "s3cret", Header: map[string]string{"X-Receiver-Token": "abc"}, Body: body})
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, deliveryWait, "the receiver gets the delivery", func() bool { return rc.count() == 1 })
	got := rc.last()
	if string(got.body) != string(body) {
		t.Errorf("body %s", got.body)
	}
	ts := got.header.Get("x-svc-timestamp")
	if ts != "1800000000" {
		t.Errorf("x-svc-timestamp %q, want the clock's seconds", ts)
	}
	sig := got.header.Get("x-svc-signature")
	// The signature of the spec, computed here independently of Sign's
	// code path: HMAC-SHA256 over timestamp "." body.
	if sig != Sign("s3cret", ts, body) || !Verify("s3cret", ts, sig, body, clk.Now(), 5*time.Minute) {
		t.Errorf("x-svc-signature %q does not verify", sig)
	}
	if Verify("other", ts, sig, body, clk.Now(), 0) || Verify("s3cret", ts, sig, append(body, ' '), clk.Now(), 0) {
		t.Error("a wrong secret or body verifies")
	}
	if Verify("s3cret", ts, sig, body, clk.Now().Add(time.Hour), 5*time.Minute) {
		t.Error("an old timestamp verifies")
	}
	if got.header.Get("x-svc-event") != "crawl.task" || got.header.Get("x-svc-delivery") != id || got.header.Get("X-Receiver-Token") != "abc" ||
		got.header.Get("Content-Type") != "application/json" {
		t.Errorf("headers %v", got.header)
	}
	testwait.Until(t, deliveryWait, "the delivery is finished", func() bool { mu.Lock(); defer mu.Unlock(); return len(finished) == 1 })
	if !finished[0].Delivered || finished[0].Attempts != 1 {
		t.Errorf("final state %+v", finished[0])
	}
	if p, _ := s.Pending(); len(p) != 0 {
		t.Errorf("pending after delivery: %+v", p)
	}
	// Without a secret, no signature.
	s.Send(Delivery{URL: rc.URL, Body: body})
	testwait.Until(t, deliveryWait, "the unsigned delivery", func() bool { return rc.count() == 2 })
	if h := rc.last().header; h.Get("x-svc-signature") != "" || h.Get("x-svc-timestamp") == "" {
		t.Errorf("unsigned delivery headers %v", h)
	}
}

// TestRetryLadder fails every attempt and moves the clock along the
// ladder: an attempt at 0, then 1 m, 5 m, 30 m, 2 h and 12 h after the
// one before, none early, and then nothing more.
func TestRetryLadder(t *testing.T) {
	rc := newReceiver(t, func(int) int { return 500 })
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	st := openStore(t, t.TempDir())
	t.Cleanup(func() { st.Close() })
	gaveUp := make(chan Delivery, 1)
	s, _ := start(t, st, Config{Now: clk.Now, OnFinish: func(d Delivery) { gaveUp <- d }})
	if _, err := s.Send(Delivery{URL: rc.URL, Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, deliveryWait, "the first attempt", func() bool { return rc.count() == 1 })
	for i, wait := range DefaultSchedule {
		testwait.Until(t, deliveryWait, "the failure is recorded", func() bool {
			p, _ := s.Pending()
			return len(p) == 1 && p[0].Attempts == i+1
		})

		clk.Advance(wait - time.Second)
		// One second early a pass sends nothing and names the due time.
		due := clk.Now().Add(time.Second)
		if next := s.sendDue(context.Background()); !next.Equal(due) || rc.count() != i+1 {
			t.Fatalf("attempt %d: a pass one second early gave next %v (want %v) and %d attempts", i+2, next, due, rc.count())
		}
		clk.Advance(time.Second)
		waitKicking(t, s, "attempt "+strconv.Itoa(i+2), func() bool { return rc.count() == i+2 })
		if a := rc.last().header.Get("x-svc-attempt"); a != strconv.Itoa(i+2) {
			t.Errorf("x-svc-attempt %q, want %d", a, i+2)
		}
	}
	select {
	case d := <-gaveUp:
		if !d.GaveUp || d.Attempts != 6 || d.LastStatus != 500 {
			t.Errorf("given up as %+v", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not given up after the last retry")
	}
	clk.Advance(48 * time.Hour)
	s.Kick()
	if p, _ := s.Pending(); len(p) != 0 || rc.count() != 6 {
		t.Errorf("after giving up: %d pending, %d attempts", len(p), rc.count())
	}
}

// TestRestartKeepsPending fails the first attempt, stops the sender and
// opens the store again: the new sender delivers at the retry time.
func TestRestartKeepsPending(t *testing.T) {
	up := false
	var mu sync.Mutex
	rc := newReceiver(t, func(int) int {
		mu.Lock()
		defer mu.Unlock()
		if up {
			return 200
		}
		return 503
	})
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	dir := t.TempDir()
	st := openStore(t, dir)
	s, stop := start(t, st, Config{Now: clk.Now})
	id, err := s.Send(Delivery{URL: rc.URL, Secret: "k", Body: []byte(`{"n":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, deliveryWait, "the failed attempt is recorded", func() bool { p, _ := s.Pending(); return len(p) == 1 && p[0].Attempts == 1 })
	stop()
	st.Close()

	mu.Lock()
	up = true
	mu.Unlock()
	st = openStore(t, dir)
	t.Cleanup(func() { st.Close() })
	s2, _ := start(t, st, Config{Now: clk.Now})
	if p, _ := s2.Pending(); len(p) != 1 || p[0].ID != id {
		t.Fatalf("pending after the restart: %+v", p)
	}
	clk.Advance(time.Minute)
	waitKicking(t, s2, "the retry after the restart", func() bool { return rc.count() == 2 })
	h := rc.last().header
	if h.Get("x-svc-delivery") != id || h.Get("x-svc-signature") != Sign("k", h.Get("x-svc-timestamp"), []byte(`{"n":1}`)) {
		t.Errorf("retried delivery headers %v", h)
	}
	testwait.Until(t, deliveryWait, "nothing pending", func() bool { p, _ := s2.Pending(); return len(p) == 0 })
}

func TestGuard(t *testing.T) {
	rc := newReceiver(t, func(int) int { return 200 })
	st := openStore(t, t.TempDir())
	t.Cleanup(func() { st.Close() })
	// Accepting: a private address is refused unless allowed, and so are
	// bad headers and bodies; nothing is stored.
	s, err := New(st, Config{Prefix: testPrefix, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []Delivery{
		{URL: rc.URL, Body: []byte(`{}`)},
		{URL: "http://10.0.0.1/hook"},
		{URL: "ftp://example.org/"},
		{URL: "https://example.org/", Header: map[string]string{"x-svc-signature": "forged"}},
		{URL: "https://example.org/", Header: map[string]string{"Host": "other"}},
		{URL: "https://example.org/", Body: []byte(`{not json`)},
	} {
		if _, err := s.Send(d); !errors.Is(err, ErrBadDelivery) {
			t.Errorf("Send(%s %v) = %v, want ErrBadDelivery", d.URL, d.Header, err)
		}
	}
	if p, _ := s.Pending(); len(p) != 0 {
		t.Errorf("refused deliveries were stored: %+v", p)
	}
	// Dialling: the address is checked after resolution, whatever the URL
	// said. Here loopback is made "public" or not for the check.
	for _, public := range []bool{false, true} {
		s.cfg.public = func(netip.Addr) bool { return public }
		before := rc.count()
		status, err := s.post(context.Background(), &Delivery{ID: "x", URL: rc.URL, Body: []byte(`{}`)})
		if public && (err != nil || status != 200 || rc.count() != before+1) {
			t.Errorf("public receiver: %d %v", status, err)
		}
		if !public && (!errors.Is(err, urlpolicy.ErrNotPublic) || rc.count() != before) {
			t.Errorf("private receiver: %d %v (receiver hit: %v)", status, err, rc.count() != before)
		}
	}
}
