package monitor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/trawlhq/trawl/cell/monitor/diff"
	"github.com/trawlhq/trawl/cell/monitor/watch"
	"github.com/trawlhq/trawl/cell/webhook"
	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/store"
)

// Event is one timeline event (hosted-api §2.9): a change, or a health
// event.
type Event struct {
	ID          int64           `json:"id"`
	Event       string          `json:"event"`
	Monitor     string          `json:"monitor"`
	URL         string          `json:"url"`
	Matched     []string        `json:"matched"`
	Summary     string          `json:"summary"`
	Facts       []diff.Fact     `json:"facts"`
	Custom      json.RawMessage `json:"custom"`
	FirstSeen   time.Time       `json:"first_seen"`
	ConfirmedAt *time.Time      `json:"confirmed_at"`
	Evidence    *Evidence       `json:"evidence"`
	CostCredits int             `json:"cost_credits"`
	Delivery    *Delivery       `json:"delivery"`

	// A health event's.
	Health  string    `json:"health,omitempty"`
	Message string    `json:"message,omitempty"`
	At      time.Time `json:"at,omitzero"`
}

// Evidence links the two versions of a change.
type Evidence struct {
	Before string `json:"before"`
	After  string `json:"after"`
}

// Delivery is a change's webhook delivery state.
type Delivery struct {
	Webhook *WebhookState `json:"webhook"`
	Done    bool          `json:"done"`
}

// WebhookState is the last attempt's state: status pending, retrying,
// delivered or failed (retries ran out).
type WebhookState struct {
	Status   string `json:"status"`
	Attempts int    `json:"attempts"`
	At       string `json:"at,omitempty"`
	// Code is the receiver's last HTTP status (0: no answer).
	Code int `json:"code,omitempty"`
}

// MarshalJSON writes a health event with only its own fields.
func (e Event) MarshalJSON() ([]byte, error) {
	if e.Event == "health" {
		return json.Marshal(struct {
			ID      int64     `json:"id"`
			Event   string    `json:"event"`
			Monitor string    `json:"monitor"`
			URL     string    `json:"url"`
			Health  string    `json:"health"`
			Message string    `json:"message"`
			At      time.Time `json:"at"`
		}{e.ID, e.Event, e.Monitor, e.URL, e.Health, e.Message, e.At})
	}
	type plain Event
	return json.Marshal(plain(e))
}

func (e *Event) time() time.Time {
	if e.Event == "health" {
		return e.At
	}
	return e.FirstSeen
}

// Charge is a background charge waiting in the outbox for the gate
// (docs/api.md, "Monitors"): a check window or a confirmed matched change.
// ID is stable, so charging it twice is charging it once.
type Charge struct {
	ID      string         `json:"id"`
	Account string         `json:"account"`
	Monitor string         `json:"monitor"`
	URL     string         `json:"url"`
	Event   int64          `json:"event,omitempty"`
	At      time.Time      `json:"at"`
	Usage   metering.Usage `json:"usage"`
}

var chargePrefix = []byte(store.PrefixMonitor + "c/")

func chargeKey(c *Charge) []byte {
	return fmt.Appendf(append([]byte{}, chargePrefix...), "%020d/%s", c.At.UnixNano(), c.ID)
}

func versionID(md string) string {
	sum := sha256.Sum256([]byte(md))
	return hex.EncodeToString(sum[:12])
}

func deliveryID(monitor string, event int64) string {
	return "mh_" + monitor + "_" + strconv.FormatInt(event, 10)
}

func evidenceURL(monitor, version string) string {
	return "/monitors/" + monitor + "/versions/" + version
}

// Tick runs every check that is due now and waits for them; it returns
// how many ran.
func (s *Service) Tick(ctx context.Context) int { return s.dispatch(ctx, true) }

// dispatch starts the checks that are due and not running; with wait it
// returns when they are done. Run does not wait, so one slow site never
// holds back the others.
func (s *Service) dispatch(ctx context.Context, wait bool) int {
	now := s.cfg.Now()
	all, err := s.records()
	if err != nil {
		s.log.Error("monitor: read monitors", "err", err)
		return 0
	}
	var wg sync.WaitGroup
	n := 0
	for _, m := range all {
		if m.Paused || m.NextAt.After(now) {
			continue
		}
		if _, busy := s.running.LoadOrStore(m.ID, struct{}{}); busy {
			continue
		}
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			s.running.Delete(m.ID)
			wg.Wait()
			return n
		}
		n++
		id, due := m.ID, m.NextAt
		s.checks.Add(1)
		wg.Go(func() {
			defer func() { <-s.slots; s.running.Delete(id); s.checks.Done() }()
			s.count(func(st *Stats) {
				if late := s.cfg.Now().Sub(due); late > st.MaxStartLate && m.Version != "" {
					st.MaxStartLate = late
				}
			})
			if err := s.check(ctx, id, due); err != nil && ctx.Err() == nil {
				s.log.Error("monitor: check", "monitor", id, "err", err)
			}
		})
	}
	if wait {
		wg.Wait()
	}
	return n
}

// check fetches one monitor's page and moves its state.
func (s *Service) check(ctx context.Context, id string, due time.Time) error {
	m, err := s.get(id)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	fctx, cancel := context.WithTimeout(ctx, s.cfg.FetchTimeout)
	page, ferr := s.cfg.Fetcher.Fetch(fctx, m.URL, m.Region)
	cancel()
	if ctx.Err() != nil {
		return nil // stopping: the check is due again at the next start
	}
	unlock := s.lock(id)
	locked := true
	defer func() {
		if locked {
			unlock()
		}
	}()
	if m, err = s.get(id); errors.Is(err, store.ErrNotFound) {
		return nil // deleted meanwhile
	} else if err != nil {
		return err
	}
	if m.Paused {
		return nil
	}
	now := s.cfg.Now()
	baseline := m.Version == ""
	s.count(func(st *Stats) {
		st.Checks++
		late := now.Sub(due)
		switch {
		case baseline && late > st.MaxBaselineLate:
			st.MaxBaselineLate = late
		case !baseline && late > st.MaxLate:
			st.MaxLate = late
		}
	})
	b := s.st.NewBatch()
	defer b.Discard()
	if ferr != nil {
		s.failed(b, m, ferr, now)
		return s.commit(b, m, b.Len() > 0)
	}
	recovered := m.Health != "ok"
	if recovered {
		s.event(b, m, &Event{Event: "health", Health: "ok", Message: "the site answers again", At: now.UTC().Truncate(time.Second)})
		m.Health, m.HealthMessage = "ok", ""
	}
	m.Fails = 0
	if !now.Before(m.BilledUntil) {
		// One credit per `every` window, at its first good check.
		u := metering.Usage{Kind: metering.KindMonitorCheck, Engine: page.Engine, Level: page.Level, Cache: metering.CacheMiss, Units: 1, Count: metering.Count(1)}
		s.charge(b, &Charge{ID: fmt.Sprintf("%s/check/%d", m.ID, now.Unix()), Account: m.Account, Monitor: m.ID, URL: m.URL, At: now.UTC(), Usage: u})
		m.BilledUntil = now.Add(m.EveryD)
	}
	doc := diff.Parse(page.Markdown)
	hash := doc.Hash()
	ver := versionID(page.Markdown)
	var deliver *Event
	n0 := b.Len() // a charge or a health event so far
	switch {
	case m.Version == "":
		b.Set(versionKey(m.ID, ver), []byte(page.Markdown))
		m.Version, m.Hash = ver, hash
	case hash == m.Hash:
		s.unchanged(b, m)
	case m.Pending != nil && hash == m.Pending.Hash:
		if !now.Before(m.Pending.ConfirmAt) {
			deliver, err = s.confirm(ctx, b, m, page, now)
			if err != nil {
				return err
			}
		}
	default:
		old, err := s.st.Get(versionKey(m.ID, m.Version))
		if err != nil {
			return fmt.Errorf("read version %s: %w", m.Version, err)
		}
		s.count(func(st *Stats) { st.Diffs++ })
		facts := diff.Compare(diff.Parse(string(old)), doc)
		if len(facts) == 0 {
			s.unchanged(b, m)
			break
		}
		s.seen(b, m, ver, hash, page.Markdown, facts, now)
	}
	m.NextAt = now.Add(m.Interval)
	durable := recovered || m.Pending != nil || deliver != nil || b.Len() > n0+1
	if baseline {
		// Monitors created together would stay in step: the second check
		// comes after a share of the interval set by the id, so checks
		// spread over it (every is the longest wait).
		m.NextAt = now.Add(m.Interval/2 + time.Duration(phase(m.ID)*float64(m.Interval/2)))
	}
	if m.Pending != nil && m.Pending.ConfirmAt.Before(m.NextAt) {
		m.NextAt = m.Pending.ConfirmAt
	}
	// A baseline, or a check that found the page unchanged, writes its
	// version, schedule and charge without a sync: lost in a crash, the
	// check runs again and is charged then. Changes and events are synced.
	if err := s.commit(b, m, durable); err != nil {
		return err
	}
	if deliver != nil {
		// Not under the monitor's lock: a refused delivery records its
		// state on the event at once (delivered takes the lock).
		locked = false
		unlock()
		s.send(m, deliver)
	}
	return nil
}

func (s *Service) commit(b *store.Batch, m *Monitor, durable bool) error {
	rec, err := json.Marshal(m)
	if err != nil {
		return err
	}
	b.Set(recordKey(m.ID), rec)
	return b.Commit(store.Durability(durable))
}

// phase is a number in [0, 1) fixed by id.
func phase(id string) float64 {
	sum := sha256.Sum256([]byte(id))
	return float64(uint32(sum[0])<<16|uint32(sum[1])<<8|uint32(sum[2])) / (1 << 24)
}

// unchanged: the page shows the current version's content. A change seen
// and not yet confirmed has reverted: it is dropped from the timeline.
func (s *Service) unchanged(b *store.Batch, m *Monitor) {
	s.count(func(st *Stats) { st.Unchanged++ })
	if m.Pending != nil {
		b.Delete(eventKey(m.ID, m.Pending.Event))
		if m.Pending.Version != m.Version {
			b.Delete(versionKey(m.ID, m.Pending.Version))
		}
		m.Pending = nil
		s.count(func(st *Stats) { st.Reverted++ })
	}
	// Quiet pages drift back to the longest wait.
	m.Interval = min(m.EveryD, 2*m.Interval)
}

// seen records a change at first sight: on the timeline at once,
// confirmed by a check after the confirmation delay.
func (s *Service) seen(b *store.Batch, m *Monitor, ver, hash, md string, facts []diff.Fact, now time.Time) {
	s.count(func(st *Stats) { st.Changes++ })
	b.Set(versionKey(m.ID, ver), []byte(md))
	n := m.LastEvent + 1
	if m.Pending != nil {
		n = m.Pending.Event // the same change, seen in a newer form
		if m.Pending.Version != ver && m.Pending.Version != m.Version {
			b.Delete(versionKey(m.ID, m.Pending.Version))
		}
	} else {
		m.LastEvent = n
	}
	e := &Event{ID: n, Event: "change", Monitor: m.ID, URL: m.URL, Matched: watch.Match(m.Conditions, facts),
		Summary: diff.Summary(facts), Facts: facts, FirstSeen: now.UTC().Truncate(time.Second),
		Evidence: &Evidence{Before: evidenceURL(m.ID, m.Version), After: evidenceURL(m.ID, ver)},
		Delivery: &Delivery{}}
	if m.Notify.Webhook != "" {
		e.Delivery.Webhook = &WebhookState{Status: "waiting for confirmation"}
	}
	s.putEvent(b, m.ID, e)
	m.Pending = &Pending{Event: n, Version: ver, Hash: hash, FirstSeen: now.UTC(), ConfirmAt: now.Add(s.cfg.ConfirmAfter)}
}

// confirm: the change is still there after the delay. It becomes the
// current version, is charged when it matched, and is delivered.
func (s *Service) confirm(ctx context.Context, b *store.Batch, m *Monitor, page *Page, now time.Time) (*Event, error) {
	p := m.Pending
	raw, err := s.st.Get(eventKey(m.ID, p.Event))
	if err != nil {
		return nil, fmt.Errorf("read event %d: %w", p.Event, err)
	}
	var e Event
	if err := json.Unmarshal(raw, &e); err != nil {
		return nil, err
	}
	at := now.UTC().Truncate(time.Second) // timeline times are ISO 8601 to the second
	e.ConfirmedAt = &at
	if len(m.Schema) > 0 {
		e.Custom = s.extract(ctx, page.Markdown, m.Schema)
	}
	if len(e.Matched) > 0 {
		e.CostCredits = PerChangeCredits
		u := metering.Usage{Kind: metering.KindMonitorChange, Engine: page.Engine, Level: page.Level, Cache: metering.CacheMiss, Count: metering.Count(1)}
		s.charge(b, &Charge{ID: fmt.Sprintf("%s/change/%d", m.ID, e.ID), Account: m.Account, Monitor: m.ID, URL: m.URL, Event: e.ID, At: at, Usage: u})
	}
	e.Delivery = &Delivery{Done: true}
	if m.Notify.Webhook != "" {
		e.Delivery = &Delivery{Webhook: &WebhookState{Status: "pending"}}
	}
	s.putEvent(b, m.ID, &e)
	m.Version, m.Hash, m.Pending = p.Version, p.Hash, nil
	// A page that changes is checked more often, down to the minimum.
	m.Interval = max(s.cfg.MinEvery, m.Interval/2)
	s.count(func(st *Stats) { st.Confirmed++ })
	if m.Notify.Webhook == "" {
		return nil, nil
	}
	return &e, nil
}

func (s *Service) extract(ctx context.Context, md string, schema json.RawMessage) json.RawMessage {
	out, err := s.cfg.Extractor.Extract(ctx, md, schema)
	if err != nil {
		s.log.Warn("monitor: extract custom", "err", err)
		out, _ = ruleExtractor{}.Extract(ctx, md, schema)
	}
	return out
}

// send hands a confirmed change to the webhook sender (after its state
// is committed; resend covers a crash in between).
func (s *Service) send(m *Monitor, e *Event) {
	body, err := json.Marshal(e)
	if err != nil {
		s.log.Error("monitor: encode event", "err", err)
		return
	}
	_, err = s.hooks.Send(webhook.Delivery{ID: deliveryID(m.ID, e.ID), URL: m.Notify.Webhook, Event: "change",
		Monitor: m.ID, Secret: m.Notify.Secret, Body: body})
	if err != nil {
		s.log.Warn("monitor: webhook refused", "monitor", m.ID, "err", err)
		s.delivered(webhook.Delivery{ID: deliveryID(m.ID, e.ID), GaveUp: true, LastError: err.Error()})
	}
}

// delivered records a delivery's final state on its event.
func (s *Service) delivered(d webhook.Delivery) {
	rest, ok := strings.CutPrefix(d.ID, "mh_")
	i := strings.LastIndexByte(rest, '_')
	if !ok || i < 0 {
		return
	}
	id := rest[:i]
	n, err := strconv.ParseInt(rest[i+1:], 10, 64)
	if err != nil {
		return
	}
	unlock := s.lock(id)
	defer unlock()
	raw, err := s.st.Get(eventKey(id, n))
	if err != nil {
		return // the monitor was deleted
	}
	var e Event
	if json.Unmarshal(raw, &e) != nil {
		return
	}
	st := &WebhookState{Status: "delivered", Attempts: d.Attempts, At: s.cfg.Now().UTC().Format(time.RFC3339), Code: d.LastStatus}
	if !d.Delivered {
		st.Status = "failed"
	}
	e.Delivery = &Delivery{Webhook: st, Done: true}
	b := s.st.NewBatch()
	s.putEvent(b, id, &e)
	if err := b.Commit(store.Sync); err != nil {
		s.log.Error("monitor: record delivery", "monitor", id, "err", err)
	}
}

// resend sends again, at start, the confirmed changes whose delivery was
// not handed to the sender before a crash.
func (s *Service) resend() error {
	pending := s.pendingDeliveries()
	all, err := s.records()
	if err != nil {
		return err
	}
	for _, m := range all {
		if m.Notify.Webhook == "" {
			continue
		}
		var todo []Event
		err := s.st.Scan(eventPrefix(m.ID), nil, func(_, v []byte) (bool, error) {
			var e Event
			if err := json.Unmarshal(v, &e); err != nil {
				return false, err
			}
			if e.ConfirmedAt != nil && e.Delivery != nil && !e.Delivery.Done {
				if _, ok := pending[deliveryID(m.ID, e.ID)]; !ok {
					todo = append(todo, e)
				}
			}
			return true, nil
		})
		if err != nil {
			return err
		}
		for i := range todo {
			s.send(m, &todo[i])
		}
	}
	return nil
}

// failed: a refused check. Retried with backoff; the third in a row is a
// health event.
func (s *Service) failed(b *store.Batch, m *Monitor, err error, now time.Time) {
	s.count(func(st *Stats) { st.Failures++ })
	m.Fails++
	health, msg := "error", "the site did not answer: "+plainError(err)
	if errors.Is(err, ErrBlocked) {
		health, msg = "blocked", "the site refused the check (a block page)"
	}
	if m.Fails == refusedInARow && m.Health != health {
		s.event(b, m, &Event{Event: "health", Health: health, Message: msg, At: now.UTC().Truncate(time.Second)})
		m.Health, m.HealthMessage = health, msg
	}
	backoff := time.Minute << min(m.Fails-1, 10)
	m.NextAt = now.Add(min(backoff, m.Interval))
}

func plainError(err error) string {
	msg := err.Error()
	if len(msg) > 200 {
		msg = msg[:200]
	}
	return msg
}

func (s *Service) event(b *store.Batch, m *Monitor, e *Event) {
	m.LastEvent++
	e.ID, e.Monitor, e.URL = m.LastEvent, m.ID, m.URL
	s.putEvent(b, m.ID, e)
}

func (s *Service) putEvent(b *store.Batch, id string, e *Event) {
	raw, err := json.Marshal(e)
	if err != nil {
		s.log.Error("monitor: encode event", "err", err)
		return
	}
	b.Set(eventKey(id, e.ID), raw)
}

func (s *Service) charge(b *store.Batch, c *Charge) {
	raw, _ := json.Marshal(c)
	b.Set(chargeKey(c), raw)
}

// Charges returns up to limit charges waiting for the gate, oldest first.
func (s *Service) Charges(limit int) ([]Charge, error) {
	var out []Charge
	err := s.st.Scan(chargePrefix, nil, func(_, v []byte) (bool, error) {
		var c Charge
		if err := json.Unmarshal(v, &c); err != nil {
			return false, err
		}
		out = append(out, c)
		return len(out) < limit, nil
	})
	return out, err
}

// AckCharges removes charges the gate has recorded.
func (s *Service) AckCharges(ids []string) (int, error) {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	b := s.st.NewBatch()
	defer b.Discard()
	n := 0
	err := s.st.Scan(chargePrefix, nil, func(k, v []byte) (bool, error) {
		var c Charge
		if err := json.Unmarshal(v, &c); err != nil {
			return false, err
		}
		if want[c.ID] {
			b.Delete(append([]byte{}, k...))
			n++
		}
		return true, nil
	})
	if err != nil {
		return 0, err
	}
	return n, b.Commit(store.Sync)
}
