// Package fchook delivers Firecrawl's webhooks of batch scrapes and
// crawls (docs/firecrawl.md, "Webhooks"). It is an observer of the cell's
// jobs manager (jobs.Observer): for a job whose shape has a "webhook"
// (firecrawl.Webhook), each event the webhook asks for becomes a
// delivery of internal/webhook, staged in the very write that records
// the event, so an event and its delivery are committed together or not
// at all. From there the deliveries are those of monitor webhooks:
// durable in the cell's store, retried on the same ladder, through the
// same SSRF guard.
//
// A delivery is a POST of Firecrawl's body
//
//	{"success", "type", "id", "webhookId", "data", "error", "metadata"}
//
// type "<kind>.<event>" (batch_scrape.page, crawl.completed, …), id the
// job's, webhookId the delivery's (a UUID, the same on every attempt and
// in trawl's x-svc-delivery; ordered as the events), data the page's document for a page event
// ([{"metadata": {"sourceURL"}}] for a page that failed, as Firecrawl
// sends) and [] otherwise, error why a page, a cancel or a failure
// ended, metadata the webhook's. Its headers: the webhook's own,
// X-Firecrawl-Signature ("sha256=" and the hex HMAC-SHA256 of the raw
// body keyed with the account's webhook secret), and trawl's
// x-svc-timestamp and x-svc-signature (over the timestamp and the body,
// with the same secret), x-svc-event, x-svc-delivery and x-svc-attempt.
//
// A job's deliveries are one group of the sender (webhook.Delivery.Group):
// sent one at a time in the order of their events, so started comes
// first and completed after the last page; one that fails is retried
// without holding back the rest.
//
// Of a job in the region's log (jobs.Event.Logged), each delivery is
// also marked in the log (Marks, jobs.Manager.ClaimMark) before the
// write that stages it, and marked done once sent or given up
// (Observer.Finished, the sender's OnFinish). A cell that lost its data
// directory records the job's events again from the log: an event whose
// delivery was sent is not delivered again, one still pending is staged
// again under the same webhookId, and one never staged (its outcome
// reached the log, not the lost store) is staged for the first time.
package fchook

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/trawlhq/trawl/cell/firecrawl"
	"github.com/trawlhq/trawl/cell/jobs"
	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/internal/webhook"
)

// Kinds maps a job shape's kind to the prefix of its events' types.
var Kinds = map[string]string{
	"firecrawl_batch_scrape": "batch_scrape",
	"firecrawl_crawl":        "crawl",
	"firecrawl_extract":      "extract",
}

// nouns name a job in an event's error.
var nouns = map[string]string{"batch_scrape": "batch scrape", "crawl": "crawl", "extract": "extraction"}

// Observer stages the webhook deliveries of jobs' events. Create it with
// New. It is safe for concurrent use.
type Observer struct {
	hooks *webhook.Sender
	log   *slog.Logger
	now   func() time.Time // the ids' clock: real time
	marks Marks            // nil: no job is in a log

	mu      sync.Mutex
	lastMS  int64
	counter uint64
}

// New returns an observer that stages its deliveries with hooks (a
// sender on its own store range, store.PrefixFirecrawlHook, that the
// caller runs).
func New(hooks *webhook.Sender, log *slog.Logger) *Observer {
	if log == nil {
		log = slog.Default()
	}
	return &Observer{hooks: hooks, log: log, now: time.Now}
}

// Marks keep, in the region's log, the delivery of each event of a job
// in the log and whether it was sent (jobs.Manager).
type Marks interface {
	ClaimMark(job, key string, mk jobs.Mark) (jobs.Mark, error)
	ReadMark(job, key string) (jobs.Mark, error)
	FinishMark(job, key, id string) error
}

// SetMarks makes the observer mark the deliveries of jobs in the log
// with ms. Call it before the first event.
func (o *Observer) SetMarks(ms Marks) { o.marks = ms }

// Finished marks a delivery done in the log (a sender's
// webhook.Config.OnFinish).
func (o *Observer) Finished(d webhook.Delivery) {
	if d.Tag == "" || o.marks == nil {
		return
	}
	if err := o.marks.FinishMark(d.Group, d.Tag, d.ID); err != nil {
		o.log.Warn("fchook: a sent delivery not marked in the region's log (sent again if the cell loses its data)",
			"job", d.Group, "delivery", d.ID, "err", err)
	}
}

// Settled reports a delivery another cell made for this one (its mark
// done under the delivery's id): the sender's webhook.Config.Settled.
func (o *Observer) Settled(d webhook.Delivery) bool {
	if d.Tag == "" || o.marks == nil {
		return false
	}
	mk, err := o.marks.ReadMark(d.Group, d.Tag)
	return err == nil && mk.Done && mk.ID == d.ID
}

// Take sends, from this cell, the delivery a cell that is down left
// pending (its mark's payload): jobs.Config.TakeMark, called by the
// region's coordinator. Sent, it is marked done, and the owner back
// drops its own copy.
func (o *Observer) Take(job, key string, mk jobs.Mark) error {
	var d webhook.Delivery
	if err := json.Unmarshal(mk.Payload, &d); err != nil {
		return fmt.Errorf("fchook: the payload of mark %s of %s: %w", key, job, err)
	}
	d.ID, d.Group, d.Tag = mk.ID, job, key
	_, err := o.hooks.Send(d)
	return err
}

// shape is what the observer reads of a job's shape.
type shape struct {
	Kind    string             `json:"kind"`
	Webhook *firecrawl.Webhook `json:"webhook"`
}

// payload is Firecrawl's webhook body, its keys in Firecrawl's order.
type payload struct {
	Success   bool              `json:"success"`
	Type      string            `json:"type"`
	ID        string            `json:"id"`
	WebhookID string            `json:"webhookId"`
	Data      []json.RawMessage `json:"data"`
	Error     string            `json:"error,omitempty"`
	Metadata  map[string]string `json:"metadata"`
}

// Stage adds e's delivery to b when e's job has a webhook that asks for
// it. A delivery that cannot be made (a document over the body's bound)
// is logged and left out: it never fails the job's write.
func (o *Observer) Stage(b *store.Batch, e *jobs.Event) error {
	marked := e.Logged && o.marks != nil
	if e.Restored && e.Kind == jobs.EventPage && !marked {
		// Recorded again after a lost disk, without marks: its delivery
		// was sent before the loss or lost with it; the job's end
		// (completed, cancelled, failed) is sent again, so a receiver
		// waiting for it hears it at least once.
		return nil
	}
	var sh shape
	if len(e.Shape) == 0 || json.Unmarshal(e.Shape, &sh) != nil || sh.Webhook == nil {
		return nil
	}
	prefix, ok := Kinds[sh.Kind]
	if !ok {
		return nil
	}
	event, p, ok := o.body(e, prefix, sh.Webhook)
	if !ok || !sh.Webhook.Wants(event) {
		return nil
	}
	p.Type, p.ID, p.WebhookID = prefix+"."+event, e.Job, o.newID()
	d := webhook.Delivery{Group: e.Job, URL: sh.Webhook.URL, Event: p.Type, Secret: sh.Webhook.Secret,
		BodySignature: firecrawl.SignatureHeader, Header: sh.Webhook.Headers}
	body, err := json.Marshal(p)
	if err != nil {
		o.log.Warn("fchook: a delivery's body", "job", e.Job, "event", p.Type, "err", err)
		return nil
	}
	d.Body = body
	if marked {
		// Before the write that stages it: the event's first mark wins,
		// and an event recorded again gets its delivery's id back. The
		// mark carries the delivery, for a cell that sends it while this
		// one is down.
		payload, _ := json.Marshal(d)
		mk, err := o.marks.ClaimMark(e.Job, e.Key, jobs.Mark{ID: p.WebhookID, Payload: payload})
		if err != nil {
			return fmt.Errorf("fchook: the delivery of %s %s not marked in the region's log: %w", e.Job, e.Key, err)
		}
		if mk.Done {
			return nil // sent (or given up) before: not again
		}
		if mk.ID != p.WebhookID { // an earlier mark's: its id in the body
			p.WebhookID = mk.ID
			d.Body, _ = json.Marshal(p) // marshalled once already
		}
		d.Tag = e.Key
	}
	d.ID = p.WebhookID
	if _, err := o.hooks.Stage(b, d); err != nil {
		o.log.Warn("fchook: a delivery left out", "job", e.Job, "event", p.Type, "url", e.URL, "err", err)
	}
	return nil
}

// body is e's event name and body (without type, id and webhookId);
// false for an event without one.
func (o *Observer) body(e *jobs.Event, prefix string, w *firecrawl.Webhook) (string, *payload, bool) {
	p := &payload{Data: []json.RawMessage{}, Metadata: w.Metadata}
	if p.Metadata == nil {
		p.Metadata = map[string]string{}
	}
	switch e.Kind {
	case jobs.EventStarted:
		p.Success = true
		return firecrawl.EventStarted, p, true
	case jobs.EventPage:
		if e.Err != nil {
			meta, _ := json.Marshal(map[string]map[string]string{"metadata": {"sourceURL": e.URL}})
			p.Error, p.Data = e.Err.Message, []json.RawMessage{meta}
			return firecrawl.EventPage, p, true
		}
		var l jobs.Line
		if err := json.Unmarshal(e.Line, &l); err != nil || len(l.Result) == 0 {
			o.log.Warn("fchook: a page's line is not a result", "job", e.Job, "url", e.URL, "err", err)
			return "", nil, false
		}
		p.Success, p.Data = true, []json.RawMessage{l.Result}
		return firecrawl.EventPage, p, true
	case jobs.EventCompleted:
		p.Success = true
		return firecrawl.EventCompleted, p, true
	case jobs.EventCancelled:
		p.Error = "the " + nouns[prefix] + " was cancelled"
		return firecrawl.EventCancelled, p, true
	case jobs.EventFailed:
		p.Error = e.Failure
		return firecrawl.EventFailed, p, true
	}
	return "", nil, false
}

// Committed makes the sender look for the deliveries just committed.
func (o *Observer) Committed(e *jobs.Event) {
	if len(e.Shape) > 0 {
		o.hooks.Kick()
	}
}

// newID is a delivery's id and webhookId: a UUID of version 7 (RFC
// 9562), the time in milliseconds and then a counter where it repeats, so
// deliveries staged one after another sort, and are first sent, in that
// order.
func (o *Observer) newID() string {
	o.mu.Lock()
	ms := o.now().UnixMilli()
	if ms <= o.lastMS {
		ms = o.lastMS
		o.counter++
	} else {
		var r [8]byte
		rand.Read(r[:])
		o.counter = binary.BigEndian.Uint64(r[:]) >> 24 // room to count up
	}
	o.lastMS = ms
	c := o.counter
	o.mu.Unlock()
	var u [16]byte
	binary.BigEndian.PutUint64(u[0:8], uint64(ms)<<16)
	// 12 bits after the version and 30 after the variant: the counter's
	// 42 bits; the last 32 bits random.
	u[6] = 0x70 | byte(c>>38)&0x0f
	u[7] = byte(c >> 30)
	v := uint64(0x2)<<62 | (c&(1<<30-1))<<32
	rand.Read(u[12:16])
	binary.BigEndian.PutUint32(u[8:12], uint32(v>>32))
	s := hex.EncodeToString(u[:])
	return s[0:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:32]
}

// Interface guard.
var _ jobs.Observer = (*Observer)(nil)
