package fchook

import (
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/cell/firecrawl"
	"github.com/trawlhq/trawl/cell/jobs"
	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/internal/webhook"
)

func newObserver(t *testing.T) (*Observer, *webhook.Sender, *store.Store) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(t.TempDir(), &store.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s, err := webhook.New(st, webhook.Config{Prefix: store.PrefixFirecrawlHook, DuePrefix: store.PrefixFirecrawlHookDue,
		AllowPrivateNetworks: true, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return New(s, log), s, st
}

func shapeOf(kind string, w *firecrawl.Webhook) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"kind": kind, "options": map[string]any{}, "webhook": w})
	return b
}

// stage runs the events through the observer in one committed batch and
// returns the deliveries staged, in the order of their ids.
func stage(t *testing.T, o *Observer, s *webhook.Sender, st *store.Store, es ...jobs.Event) []webhook.Delivery {
	t.Helper()
	b := st.NewBatch()
	for i := range es {
		if err := o.Stage(b, &es[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(store.Sync); err != nil {
		t.Fatal(err)
	}
	p, err := s.Pending()
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(p, func(a, b webhook.Delivery) int { return strings.Compare(a.ID, b.ID) })
	return p
}

// Each event the webhook asks for becomes Firecrawl's body, typed by the
// job's kind, signed with the webhook's secret; the others, jobs without
// a webhook and kinds the observer does not know stage nothing.
func TestStageEvents(t *testing.T) {
	o, s, st := newObserver(t)
	w := &firecrawl.Webhook{URL: "http://127.0.0.1:8080/hook", Headers: map[string]string{"X-T": "1"}, Metadata: map[string]string{"m": "v"},
		Events: []string{"page", "failed"}, Secret: "whsec_0123456789abcdef"}
	crawl := shapeOf("firecrawl_crawl", w)
	doc := `{"markdown":"# Kettles","metadata":{"sourceURL":"https://a.example/k"}}`
	got := stage(t, o, s, st,
		jobs.Event{Kind: jobs.EventStarted, Job: "j_eu.c1.1", Shape: crawl},
		jobs.Event{Kind: jobs.EventPage, Job: "j_eu.c1.1", Shape: crawl, URL: "https://a.example/k", Line: []byte(`{"url":"https://a.example/k","ok":true,"result":` + doc + `}`)},
		jobs.Event{Kind: jobs.EventPage, Job: "j_eu.c1.1", Shape: crawl, URL: "https://a.example/gone", Err: &httpjson.HTTPError{Status: 502, Code: "fetch_failed", Message: "the site did not answer"}},
		jobs.Event{Kind: jobs.EventCompleted, Job: "j_eu.c1.1", Shape: crawl},
		jobs.Event{Kind: jobs.EventFailed, Job: "j_eu.c1.1", Shape: crawl, Failure: "the account ran out of credit"},
		jobs.Event{Kind: jobs.EventCancelled, Job: "j_eu.c1.1", Shape: crawl},
		jobs.Event{Kind: jobs.EventPage, Job: "j_eu.c1.2", Shape: shapeOf("firecrawl_crawl", nil), URL: "https://a.example/", Line: []byte(`{"ok":true,"result":{}}`)},
		jobs.Event{Kind: jobs.EventPage, Job: "j_eu.c1.3", Shape: shapeOf("something_else", w), URL: "https://a.example/", Line: []byte(`{"ok":true,"result":{}}`)},
	)
	want := []string{
		`{"success":true,"type":"crawl.page","id":"j_eu.c1.1","webhookId":"*","data":[` + doc + `],"metadata":{"m":"v"}}`,
		`{"success":false,"type":"crawl.page","id":"j_eu.c1.1","webhookId":"*","data":[{"metadata":{"sourceURL":"https://a.example/gone"}}],"error":"the site did not answer","metadata":{"m":"v"}}`,
		`{"success":false,"type":"crawl.failed","id":"j_eu.c1.1","webhookId":"*","data":[],"error":"the account ran out of credit","metadata":{"m":"v"}}`,
		`{"success":false,"type":"crawl.cancelled","id":"j_eu.c1.1","webhookId":"*","data":[],"error":"the crawl was cancelled","metadata":{"m":"v"}}`,
	}
	if len(got) != len(want) {
		t.Fatalf("%d deliveries staged, want %d: %+v", len(got), len(want), got)
	}
	for i, d := range got {
		body := strings.Replace(string(d.Body), `"webhookId":"`+d.ID+`"`, `"webhookId":"*"`, 1)
		if body != want[i] {
			t.Errorf("delivery %d:\n got %s\nwant %s", i, body, want[i])
		}
		var p struct{ Type string }
		json.Unmarshal(d.Body, &p)
		if d.URL != w.URL || d.Secret != w.Secret || d.Event != p.Type || d.Header["X-T"] != "1" ||
			!webhook.VerifyBody(w.Secret, d.Header[firecrawl.SignatureHeader], d.Body) {
			t.Errorf("delivery %d: %+v", i, d)
		}
	}
}

// A batch scrape's events are batch_scrape.*; a webhook without events
// gets them all; ids are UUIDs in the order the deliveries were staged,
// however the clock stands.
func TestStageBatchAndOrder(t *testing.T) {
	o, s, st := newObserver(t)
	frozen := time.Unix(1_800_000_000, 0)
	o.now = func() time.Time { return frozen }
	w := &firecrawl.Webhook{URL: "http://127.0.0.1:8080/hook", Secret: "whsec_0123456789abcdef"}
	batch := shapeOf("firecrawl_batch_scrape", w)
	var es []jobs.Event
	es = append(es, jobs.Event{Kind: jobs.EventStarted, Job: "j", Shape: batch})
	for range 40 {
		es = append(es, jobs.Event{Kind: jobs.EventPage, Job: "j", Shape: batch, URL: "https://a.example/", Line: []byte(`{"ok":true,"result":{"markdown":"x"}}`)})
	}
	es = append(es, jobs.Event{Kind: jobs.EventCompleted, Job: "j", Shape: batch})
	got := stage(t, o, s, st, es...)
	if len(got) != 42 {
		t.Fatalf("%d deliveries", len(got))
	}
	for i, d := range got {
		if len(d.ID) != 36 || d.ID[14] != '7' {
			t.Errorf("id %q is not a UUID v7", d.ID)
		}
		want := "batch_scrape.page"
		switch i {
		case 0:
			want = "batch_scrape.started"
		case 41:
			want = "batch_scrape.completed"
		}
		if d.Event != want {
			t.Fatalf("in id order, delivery %d is %s, want %s", i, d.Event, want)
		}
		if !strings.Contains(string(d.Body), `"metadata":{}`) {
			t.Errorf("metadata is not {}: %s", d.Body)
		}
	}
}

// Events recorded again by a restore (a cell back on an empty disk):
// a page's delivery is not repeated, the job's end is.
func TestStageRestoredEvents(t *testing.T) {
	o, s, st := newObserver(t)
	w := &firecrawl.Webhook{URL: "http://127.0.0.1:8080/hook", Secret: "whsec_0123456789abcdef"}
	crawl := shapeOf("firecrawl_crawl", w)
	got := stage(t, o, s, st,
		jobs.Event{Kind: jobs.EventPage, Job: "j_eu.c1.1", Shape: crawl, URL: "https://a.example/k", Line: []byte(`{"ok":true,"result":{}}`), Restored: true},
		jobs.Event{Kind: jobs.EventCompleted, Job: "j_eu.c1.1", Shape: crawl, Restored: true},
	)
	if len(got) != 1 || got[0].Event != "crawl.completed" {
		t.Fatalf("restored events staged %+v, want the completed one only", got)
	}
}

// fakeMarks keeps marks as the region's log does: the first claim of an
// event wins.
type fakeMarks struct {
	m    map[string]jobs.Mark
	down bool
}

func (f *fakeMarks) ClaimMark(job, key string, mk jobs.Mark) (jobs.Mark, error) {
	if f.down {
		return jobs.Mark{}, io.ErrUnexpectedEOF
	}
	if had, ok := f.m[job+"/"+key]; ok {
		return had, nil
	}
	f.m[job+"/"+key] = mk
	return mk, nil
}

func (f *fakeMarks) ReadMark(job, key string) (jobs.Mark, error) { return f.m[job+"/"+key], nil }

func (f *fakeMarks) FinishMark(job, key, id string) error {
	f.m[job+"/"+key] = jobs.Mark{ID: id, Done: true}
	return nil
}

// A job in the region's log: each delivery is marked before it is
// staged; an event recorded again (a restore after a lost disk) is
// staged under the delivery id its mark has, or not at all once its
// mark is done; one never marked (its outcome reached the log, not the
// lost store) is staged as new. Without the log, nothing is staged.
func TestStageMarkedEvents(t *testing.T) {
	o, s, st := newObserver(t)
	marks := &fakeMarks{m: map[string]jobs.Mark{
		"j_eu.c1.1/page.8": {ID: "0190a1b2-0000-7000-8000-000000000001"},
		"j_eu.c1.1/page.9": {ID: "0190a1b2-0000-7000-8000-000000000002", Done: true},
	}}
	o.SetMarks(marks)
	w := &firecrawl.Webhook{URL: "http://127.0.0.1:8080/hook", Secret: "whsec_0123456789abcdef"}
	crawl := shapeOf("firecrawl_crawl", w)
	line := []byte(`{"ok":true,"result":{}}`)
	page := func(key string, restored bool) jobs.Event {
		return jobs.Event{Kind: jobs.EventPage, Job: "j_eu.c1.1", Shape: crawl, URL: "https://a.example/" + key, Line: line,
			Key: key, Logged: true, Restored: restored}
	}
	got := stage(t, o, s, st,
		page("page.7", false), // new
		page("page.8", true),  // pending before the loss
		page("page.9", true),  // sent before the loss
		page("page.10", true), // never staged before the loss
	)
	if len(got) != 3 {
		t.Fatalf("staged %d deliveries, want 3: %+v", len(got), got)
	}
	byTag := map[string]webhook.Delivery{}
	for _, d := range got {
		var body struct{ WebhookID string }
		if err := json.Unmarshal(d.Body, &body); err != nil || body.WebhookID != d.ID {
			t.Fatalf("delivery %s: webhookId %q (%v)", d.ID, body.WebhookID, err)
		}
		if marks.m["j_eu.c1.1/"+d.Tag].ID != d.ID {
			t.Fatalf("delivery %s (%s) is not its event's mark %+v", d.ID, d.Tag, marks.m["j_eu.c1.1/"+d.Tag])
		}
		byTag[d.Tag] = d
	}
	if byTag["page.8"].ID != "0190a1b2-0000-7000-8000-000000000001" || byTag["page.7"].ID == "" || byTag["page.10"].ID == "" {
		t.Fatalf("deliveries by event: %+v", byTag)
	}
	o.Finished(byTag["page.7"])
	if mk := marks.m["j_eu.c1.1/page.7"]; !mk.Done || mk.ID != byTag["page.7"].ID {
		t.Fatalf("a sent delivery's mark: %+v", mk)
	}
	// Its event recorded again: not staged again (the three staged
	// above are all the sender has), and one pending keeps its id.
	if again := stage(t, o, s, st, page("page.7", true), page("page.8", true)); len(again) != 3 {
		t.Fatalf("recorded again, the sender has %d deliveries, want the 3 staged before: %+v", len(again), again)
	}
	// Another cell acting for this one while it is down (the region's
	// coordinator) sends a pending delivery from its mark's payload,
	// under its id, and marks it done; this cell's copy is then settled.
	o2, s2, _ := newObserver(t)
	o2.SetMarks(marks)
	mk10 := marks.m["j_eu.c1.1/page.10"]
	if len(mk10.Payload) == 0 {
		t.Fatal("the mark carries no delivery")
	}
	for range 2 { // taken twice (a new coordinator): one delivery
		if err := o2.Take("j_eu.c1.1", "page.10", mk10); err != nil {
			t.Fatal(err)
		}
	}
	p2, _ := s2.Pending()
	if len(p2) != 1 || p2[0].ID != byTag["page.10"].ID || p2[0].Tag != "page.10" || p2[0].Group != "j_eu.c1.1" ||
		string(p2[0].Body) != string(byTag["page.10"].Body) || p2[0].Header[firecrawl.SignatureHeader] != byTag["page.10"].Header[firecrawl.SignatureHeader] {
		t.Fatalf("taken: %+v, want %+v", p2, byTag["page.10"])
	}
	if o.Settled(byTag["page.10"]) {
		t.Fatal("settled before the other cell sent it")
	}
	o2.Finished(p2[0])
	if !o.Settled(byTag["page.10"]) || o.Settled(byTag["page.8"]) {
		t.Fatal("the other cell's delivery does not settle this cell's copy (or settles another)")
	}
	// The log unavailable: the write that records the event fails (its
	// outcome is offered again), rather than an unmarked delivery.
	marks.down = true
	b := st.NewBatch()
	defer b.Discard()
	e := page("page.11", false)
	if err := o.Stage(b, &e); err == nil {
		t.Fatal("staged without its mark")
	}
}
