package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/internal/testwait"
)

// startIndexed runs a sender that keeps the due index (Config.DuePrefix).
func startIndexed(t *testing.T, st *store.Store, cfg Config) (*Sender, func()) {
	t.Helper()
	cfg.DuePrefix = store.PrefixFirecrawlHookDue
	return start(t, st, cfg)
}

// dueEntries counts the due index's entries.
func dueEntries(t *testing.T, st *store.Store) int {
	t.Helper()
	n := 0
	if err := st.Scan([]byte(store.PrefixFirecrawlHookDue), nil, func(_, _ []byte) (bool, error) { n++; return true, nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// A staged delivery exists once the caller's batch is committed, and not
// before; a discarded batch leaves nothing. It is signed as a sent one,
// with its body signature beside the timestamped one.
func TestStage(t *testing.T) {
	for _, indexed := range []bool{false, true} {
		t.Run("indexed="+strconv.FormatBool(indexed), func(t *testing.T) {
			rc := newReceiver(t, func(int) int { return 200 })
			clk := &clock{t: time.Unix(1_800_000_000, 0)}
			st := openStore(t, t.TempDir())
			t.Cleanup(func() { st.Close() })
			run := start
			if indexed {
				run = startIndexed
			}
			s, _ := run(t, st, Config{Now: clk.Now})
			body := []byte(`{"success":true,"type":"batch_scrape.page","data":[{"markdown":"# hi"}]}`)

			// Discarded: nothing stored, nothing sent.
			b := st.NewBatch()
			if _, err := s.Stage(b, Delivery{URL: rc.URL, Secret: "k", BodySignature: "X-Firecrawl-Signature", Body: body}); err != nil {
				t.Fatal(err)
			}
			b.Discard()
			s.Kick()
			if p, _ := s.Pending(); len(p) != 0 {
				t.Fatalf("a discarded stage left %+v", p)
			}

			// Staged with the caller's own record, committed together.
			b = st.NewBatch()
			b.Set([]byte(store.PrefixJob+"owner"), []byte("the event that owes the delivery"))
			id, err := s.Stage(b, Delivery{ID: "wh_fixed", URL: rc.URL, Event: "batch_scrape.page", Secret: "k",
				BodySignature: "X-Firecrawl-Signature", Header: map[string]string{"x-firecrawl-signature": "forged", "X-Mine": "1"}, Body: body})
			if err != nil || id != "wh_fixed" {
				t.Fatalf("Stage: %q %v", id, err)
			}
			if p, _ := s.Pending(); len(p) != 0 || rc.count() != 0 {
				t.Fatalf("visible before the commit: %+v, %d sent", p, rc.count())
			}
			if err := b.Commit(store.Sync); err != nil {
				t.Fatal(err)
			}
			s.Kick()
			testwait.Until(t, deliveryWait, "the staged delivery", func() bool { return rc.count() == 1 })
			got := rc.last()
			h := got.header
			if string(got.body) != string(body) || h.Get("x-svc-delivery") != "wh_fixed" || h.Get("x-svc-event") != "batch_scrape.page" || h.Get("X-Mine") != "1" {
				t.Errorf("delivery %s %v", got.body, h)
			}
			if sig := h.Get("X-Firecrawl-Signature"); sig != SignBody("k", body) || !VerifyBody("k", sig, got.body) || len(h.Values("X-Firecrawl-Signature")) != 1 {
				t.Errorf("body signature %q (the caller's header is replaced)", h.Values("X-Firecrawl-Signature"))
			}
			if VerifyBody("other", h.Get("X-Firecrawl-Signature"), got.body) || VerifyBody("k", h.Get("X-Firecrawl-Signature"), append(got.body, ' ')) {
				t.Error("a wrong secret or body verifies")
			}
			if !Verify("k", h.Get("x-svc-timestamp"), h.Get("x-svc-signature"), got.body, clk.Now(), 5*time.Minute) {
				t.Errorf("x-svc-signature %q does not verify", h.Get("x-svc-signature"))
			}
			testwait.Until(t, deliveryWait, "nothing pending", func() bool { p, _ := s.Pending(); return len(p) == 0 })
			if indexed {
				testwait.Until(t, deliveryWait, "the index emptied", func() bool { return dueEntries(t, st) == 0 })
			}

			// A delivery Check refuses is refused by Stage too, and b
			// keeps none of it.
			b = st.NewBatch()
			defer b.Discard()
			if _, err := s.Stage(b, Delivery{URL: "ftp://example.org/", Body: body}); !errors.Is(err, ErrBadDelivery) {
				t.Errorf("Stage of a bad URL: %v", err)
			}
			if _, err := s.Stage(b, Delivery{URL: rc.URL, Secret: "k", BodySignature: "X-Svc-Signature", Body: body}); !errors.Is(err, ErrBadDelivery) {
				t.Errorf("a body signature in the sender's own header: %v", err)
			}
			if b.Len() != 0 {
				t.Errorf("refused stages wrote %d keys", b.Len())
			}
		})
	}
}

// Send keeps its behaviour and signs the body too when asked; without a
// secret there is no body signature.
func TestSendBodySignature(t *testing.T) {
	rc := newReceiver(t, func(int) int { return 204 })
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	st := openStore(t, t.TempDir())
	t.Cleanup(func() { st.Close() })
	s, _ := start(t, st, Config{Now: clk.Now})
	body := []byte(`{"n":1}`)
	if _, err := s.Send(Delivery{URL: rc.URL, Secret: "s3cret", BodySignature: "X-Firecrawl-Signature", Body: body}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, deliveryWait, "the signed delivery", func() bool { return rc.count() == 1 })
	if h := rc.last().header; !VerifyBody("s3cret", h.Get("X-Firecrawl-Signature"), body) ||
		!Verify("s3cret", h.Get("x-svc-timestamp"), h.Get("x-svc-signature"), body, clk.Now(), time.Minute) {
		t.Errorf("headers %v", h)
	}
	if _, err := s.Send(Delivery{URL: rc.URL, BodySignature: "X-Firecrawl-Signature", Body: body}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, deliveryWait, "the unsigned delivery", func() bool { return rc.count() == 2 })
	if h := rc.last().header; h.Get("X-Firecrawl-Signature") != "" || h.Get("x-svc-signature") != "" {
		t.Errorf("unsigned delivery headers %v", h)
	}
}

// With the due index, a failed attempt is due again on the ladder: the
// index entry moves with it (one entry per pending delivery), nothing is
// sent early, and a restart resumes from the index.
func TestDueIndexRetryAndRestart(t *testing.T) {
	rc := newReceiver(t, func(n int) int {
		if n == 1 {
			return 503
		}
		return 200
	})
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	dir := t.TempDir()
	st := openStore(t, dir)
	s, stop := startIndexed(t, st, Config{Now: clk.Now})
	b := st.NewBatch()
	id, err := s.Stage(b, Delivery{URL: rc.URL, Secret: "k", BodySignature: "X-Firecrawl-Signature", Body: []byte(`{"a":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(store.Sync); err != nil {
		t.Fatal(err)
	}
	s.Kick()
	testwait.Until(t, deliveryWait, "the failed attempt is recorded", func() bool {
		p, _ := s.Pending()
		return len(p) == 1 && p[0].Attempts == 1
	})
	if n := dueEntries(t, st); n != 1 {
		t.Fatalf("%d index entries for one pending delivery", n)
	}
	// Not due yet: a pass sends nothing and names the retry's time.
	clk.Advance(30 * time.Second)
	if next := s.sendDue(t.Context()); !next.Equal(clk.Now().Add(30*time.Second)) || rc.count() != 1 {
		t.Fatalf("early pass: next %v, %d attempts", next, rc.count())
	}
	stop()
	st.Close()

	st = openStore(t, dir)
	t.Cleanup(func() { st.Close() })
	s2, _ := startIndexed(t, st, Config{Now: clk.Now})
	clk.Advance(30 * time.Second)
	waitKicking(t, s2, "the retry after the restart", func() bool { return rc.count() == 2 })
	h := rc.last().header
	if h.Get("x-svc-delivery") != id || h.Get("x-svc-attempt") != "2" || !VerifyBody("k", h.Get("X-Firecrawl-Signature"), []byte(`{"a":1}`)) {
		t.Errorf("retried delivery headers %v", h)
	}
	testwait.Until(t, deliveryWait, "nothing pending", func() bool { p, _ := s2.Pending(); return len(p) == 0 && dueEntries(t, st) == 0 })
}

// The index is read in order of due time, then id, at most duePass at a
// look: more due deliveries than one look reads all go, in the order they
// were staged with ordered ids.
func TestDueIndexManyInOrder(t *testing.T) {
	rc := newReceiver(t, func(int) int { return 200 })
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	st := openStore(t, t.TempDir())
	t.Cleanup(func() { st.Close() })
	s, err := New(st, Config{Prefix: testPrefix, DuePrefix: store.PrefixFirecrawlHookDue, AllowPrivateNetworks: true,
		Now: clk.Now, Logger: slog.New(slog.DiscardHandler), Parallel: 1, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s.duePass = 8
	const n = 30
	b := st.NewBatch()
	for i := range n {
		if _, err := s.Stage(b, Delivery{ID: "wh_" + pad(i), URL: rc.URL, Body: []byte(`{"i":` + strconv.Itoa(i) + `}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(store.Sync); err != nil {
		t.Fatal(err)
	}
	// One sender, one attempt at a time: the receiver sees the order.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	// Bounded by progress, not by a total: on a loaded CI machine (race
	// detector, every package at once) 30 sequential deliveries once took
	// longer than a minute in all. A stall is no new delivery for
	// deliveryWait.
	for last, seen := 0, time.Now(); ; {
		c := rc.count()
		if c == n {
			break
		}
		if c != last {
			last, seen = c, time.Now()
		} else if time.Since(seen) > deliveryWait {
			t.Fatalf("no delivery for %v after %d of %d", deliveryWait, c, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for i, g := range rc.got {
		if want := `{"i":` + strconv.Itoa(i) + `}`; string(g.body) != want {
			t.Fatalf("delivery %d is %s, want %s", i, g.body, want)
		}
	}
}

func pad(i int) string {
	s := strconv.Itoa(i)
	return strings.Repeat("0", 6-len(s)) + s
}

// A group's deliveries go one at a time, in order, however many attempts
// run at once; one that fails waits for its retry without holding back
// the rest of its group, and another group goes beside it.
func TestGroupInOrder(t *testing.T) {
	var failed atomic.Bool
	rc := &receiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		if string(b) == `{"g":"a","i":0}` && failed.CompareAndSwap(false, true) {
			w.WriteHeader(500) // group a's first delivery fails once
			return
		}
		rc.mu.Lock()
		rc.got = append(rc.got, received{req.Header.Clone(), b})
		rc.mu.Unlock()
	}))
	t.Cleanup(rc.Close)
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	st := openStore(t, t.TempDir())
	t.Cleanup(func() { st.Close() })
	s, _ := startIndexed(t, st, Config{Now: clk.Now, Parallel: 4})
	b := st.NewBatch()
	const n = 30
	for i := range n {
		for _, g := range []string{"a", "b"} {
			if _, err := s.Stage(b, Delivery{ID: "wh_" + g + pad(i), Group: "job-" + g, URL: rc.URL, Body: []byte(`{"g":"` + g + `","i":` + strconv.Itoa(i) + `}`)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := b.Commit(store.Sync); err != nil {
		t.Fatal(err)
	}
	s.Kick()
	testwait.Until(t, deliveryWait, "all but the failed one", func() bool { return rc.count() == 2*n-1 })
	order := func() map[string][]int {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		out := map[string][]int{}
		for _, g := range rc.got {
			var v struct {
				G string
				I int
			}
			json.Unmarshal(g.body, &v)
			out[v.G] = append(out[v.G], v.I)
		}
		return out
	}
	o := order()
	for g, first := range map[string]int{"a": 1, "b": 0} {
		if len(o[g]) != n-first {
			t.Fatalf("group %s: %v", g, o[g])
		}
		for k, i := range o[g] {
			if i != k+first {
				t.Fatalf("group %s out of order: %v", g, o[g])
			}
		}
	}
	clk.Advance(time.Minute)
	waitKicking(t, s, "the retry", func() bool { return rc.count() == 2*n })
	if o := order(); o["a"][n-1] != 0 {
		t.Errorf("the retry is %v", o["a"])
	}
	testwait.Until(t, deliveryWait, "nothing pending", func() bool { p, _ := s.Pending(); return len(p) == 0 && dueEntries(t, st) == 0 })
}

// A delivery made elsewhere (Config.Settled) is removed unsent, without
// OnFinish, and the next of its group goes; Send of an id already
// pending keeps the one pending (its attempts, its one index entry).
func TestSettledAndSendAgain(t *testing.T) {
	rc := newReceiver(t, func(n int) int { return 503 })
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	st := openStore(t, t.TempDir())
	t.Cleanup(func() { st.Close() })
	var settled sync.Map
	var finished atomic.Int32
	s, _ := startIndexed(t, st, Config{Now: clk.Now,
		Settled:  func(d Delivery) bool { _, ok := settled.Load(d.ID); return ok },
		OnFinish: func(Delivery) { finished.Add(1) }})
	a := Delivery{ID: "a", Group: "g", URL: rc.URL, Body: []byte(`{"a":1}`), Tag: "page.1"}
	if _, err := s.Send(a); err != nil {
		t.Fatal(err)
	}
	waitKicking(t, s, "the first attempt failed", func() bool { p, _ := s.Pending(); return len(p) == 1 && p[0].Attempts == 1 })
	if _, err := s.Send(a); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.Pending(); len(p) != 1 || p[0].Attempts != 1 || p[0].Tag != "page.1" || dueEntries(t, st) != 1 {
		t.Fatalf("sent again: %+v, %d index entries", p, dueEntries(t, st))
	}
	settled.Store("a", true)
	clk.Advance(time.Hour)
	waitKicking(t, s, "the settled delivery removed", func() bool { p, _ := s.Pending(); return len(p) == 0 && dueEntries(t, st) == 0 })
	if rc.count() != 1 || finished.Load() != 0 {
		t.Fatalf("%d attempts (want the first only), %d finished", rc.count(), finished.Load())
	}
}
