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
	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/monstore"
	"github.com/trawlhq/trawl/internal/webhook"
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

// Delivery is a change's delivery state: its webhook and, when the
// monitor has notify.email, its mail (docs/api.md).
type Delivery struct {
	Webhook *WebhookState `json:"webhook"`
	Email   *WebhookState `json:"email,omitempty"`
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

var chargePrefix = []byte(monstore.ChargePrefix)

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

// claimBatch is how many due checks one claim takes: a few times the
// checks in flight, so a burst (a thousand baselines) is claimed in a few
// calls and started as slots free up.
func (s *Service) claimBatch() int { return 4 * s.cfg.Parallel }

// lease is how long a claim holds without a result: a backstop for a
// cell that hangs while its gate still sees it live (a dead cell's claims
// are void at once). A claimed check may wait for claimBatch/Parallel
// checks before it, each up to the fetch timeout.
func (s *Service) lease() time.Duration {
	return time.Duration(s.claimBatch()/s.cfg.Parallel+2)*s.cfg.FetchTimeout + time.Minute
}

// dispatch claims the checks that are due for this cell (the region's
// store hands each due monitor to one live cell) and starts each as a
// slot frees up, claiming again while a claim comes back full; with wait
// it returns when they are done. Run does not wait, so one slow site
// never holds back the others.
func (s *Service) dispatch(ctx context.Context, wait bool) int {
	now := s.cfg.Now()
	if q := s.queue.Load(); q != nil {
		if q.Scheduling() {
			return s.schedule(ctx, q.CheckQueue)
		}
		// The safety net of a region whose scheduler is missing for a
		// moment (the lease moving, its holder cut off): a check overdue
		// by overdueGrace is claimed by its own cell, as without a queue.
		// The scheduler claims a check within a second of its due time,
		// so this claims nothing while there is one.
		now = now.Add(-overdueGrace)
	}
	var wg sync.WaitGroup
	n := 0
	defer func() {
		if wait {
			wg.Wait()
		}
	}()
	for {
		claimed, err := s.st.Claim(ctx, monstore.ClaimRequest{Cell: s.cfg.Cell, Instance: s.instance, Now: now,
			Max: s.claimBatch(), Lease: s.lease()})
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("monitor: claim due checks", "err", err)
			}
			return n
		}
		for _, c := range claimed {
			var m Monitor
			if err := json.Unmarshal(c.Record, &m); err != nil {
				s.log.Error("monitor: claimed record", "monitor", c.ID, "err", err)
				continue
			}
			select {
			case s.slots <- struct{}{}:
			case <-ctx.Done():
				return n // the claims left lapse with this process
			}
			n++
			s.checks.Add(1)
			wg.Go(func() {
				defer func() { <-s.slots; s.checks.Done() }()
				s.runCheck(ctx, &m, []byte(c.Record))
			})
		}
		if len(claimed) < s.claimBatch() {
			return n
		}
	}
}

// claimedBy reports whether m is still claimed by the claim a check began
// with (this process's, or the region's scheduler's for a work item).
func claimedBy(m *Monitor, c *monstore.Claim) bool {
	return c != nil && m.Claim != nil && m.Claim.Cell == c.Cell && m.Claim.Instance == c.Instance
}

// Checks as work items (docs/jetstream-design.md §5). In a region of
// clustered cells one scheduler claims every due check: the cell that
// holds the region's coordinator lease (CheckQueue.Scheduling) claims
// them all from the region's store (ClaimRequest.All) and publishes each
// claimed record to the region's work queue, where any cell's puller
// takes it and runs it (RunClaimed) as a claimed check: its write still
// requires the record as claimed, so a check redelivered after its cell
// died, or queued twice by two schedulers (a lease moving), writes one
// result. A check whose item is lost with every delivery is claimed again
// when its claim lapses; a scheduler that dies leaves claims of a dead
// cell, void at once, and the next one claims the checks again.

// CheckQueue is the region's work queue for checks (the cell wires it to
// JetStream).
type CheckQueue interface {
	// Scheduling reports whether this cell schedules the region's checks
	// now.
	Scheduling() bool
	// Room is how many more checks the queue should take now (those
	// waiting for a puller are few: a claim waits in the queue, not in
	// the store).
	Room(ctx context.Context) int
	// Publish queues a claimed check.
	Publish(ctx context.Context, c monstore.Claimed) error
}

type queueRef struct{ CheckQueue }

// overdueGrace is how long past its due time a check of a region with a
// queue waits for the scheduler before its own cell claims it (dispatch).
const overdueGrace = 5 * time.Second

// SetQueue makes the service's checks work items of q from now on: this
// cell claims checks only while q says it schedules, and runs those its
// pullers take (RunClaimed). Checks it claimed before finish as they
// are.
func (s *Service) SetQueue(q CheckQueue) {
	s.queue.Store(&queueRef{q})
	s.Kick()
}

// schedule claims the region's due checks, while this cell schedules,
// and queues them; it returns how many.
func (s *Service) schedule(ctx context.Context, q CheckQueue) int {
	n := 0
	for q.Scheduling() {
		room := min(q.Room(ctx), s.claimBatch())
		if room <= 0 {
			return n
		}
		claimed, err := s.st.Claim(ctx, monstore.ClaimRequest{Cell: s.cfg.Cell, Instance: s.instance, Now: s.cfg.Now(),
			Max: room, Lease: s.lease(), All: true})
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("monitor: claim the region's due checks", "err", err)
			}
			return n
		}
		for _, c := range claimed {
			if err := q.Publish(ctx, c); err != nil {
				// Claimed and not queued: claimed again when the claim
				// lapses.
				s.log.Warn("monitor: due check not queued", "monitor", c.ID, "err", err)
				return n
			}
			n++
		}
		if len(claimed) < room {
			return n
		}
	}
	return n
}

// RunClaimed runs a check a puller took from the region's queue (the
// record as the scheduler claimed it) when a slot is free, and returns
// once it is done; an unreadable record is dropped, and so is a check
// whose claim lapsed before it got a slot: the scheduler claims that
// monitor again (a check is delivered until it runs, so an item of a
// claim long gone would otherwise fetch the page for nothing).
func (s *Service) RunClaimed(ctx context.Context, c monstore.Claimed) {
	var m Monitor
	if err := json.Unmarshal(c.Record, &m); err != nil {
		s.log.Error("monitor: queued record", "monitor", c.ID, "err", err)
		return
	}
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return
	}
	s.checks.Add(1)
	defer func() { <-s.slots; s.checks.Done() }()
	if m.Claim == nil || !m.Claim.Until.After(s.cfg.Now()) {
		s.log.Info("monitor: queued check dropped, its claim lapsed", "monitor", m.ID)
		s.count(func(st *Stats) { st.Lapsed++ })
		return
	}
	s.runCheck(ctx, &m, []byte(c.Record))
}

// runCheck runs claimed check m (as stored: raw) in a slot it holds: its
// start's lateness counted, its error logged.
func (s *Service) runCheck(ctx context.Context, m *Monitor, raw []byte) {
	s.count(func(st *Stats) {
		if late := s.cfg.Now().Sub(m.NextAt); late > st.MaxStartLate && m.Version != "" {
			st.MaxStartLate = late
		}
	})
	if err := s.check(ctx, m, raw); err != nil && ctx.Err() == nil {
		s.log.Error("monitor: check", "monitor", m.ID, "err", err)
	}
}

// check fetches one claimed monitor's page and writes its new state, on
// the condition that the record is still as claimed. A patch that wrote
// the record meanwhile (it keeps the claim) makes it apply the same page
// to the record as it is now; a record claimed by another cell (this one
// was taken for dead) or deleted ends the check without a write. The
// check is of the slot and claim m has as claimed.
func (s *Service) check(ctx context.Context, m *Monitor, raw []byte) error {
	due, claim := m.NextAt, m.Claim
	fctx, cancel := context.WithTimeout(ctx, s.cfg.FetchTimeout)
	page, ferr := s.cfg.Fetcher.Fetch(fctx, m.URL, m.Region)
	cancel()
	if ctx.Err() != nil {
		return nil // stopping: the claim lapses and the check runs again
	}
	for range retries {
		err := s.record(ctx, m, raw, page, ferr, due)
		if !errors.Is(err, monstore.ErrConflict) {
			return err
		}
		var gerr error
		if m, raw, gerr = s.get(ctx, m.ID); errors.Is(gerr, monstore.ErrNotFound) {
			return nil // deleted meanwhile
		} else if gerr != nil {
			return gerr
		}
		if !claimedBy(m, claim) {
			return nil // claimed again (this one was taken for dead): the other check's result counts
		}
	}
	return fmt.Errorf("monitor %s: the record kept changing", m.ID)
}

// record applies a check's outcome to m (as stored: raw) in one
// conditional batch.
func (s *Service) record(ctx context.Context, m *Monitor, raw []byte, page *Page, ferr error, due time.Time) error {
	b := &monstore.Batch{}
	b.Require(recordKey(m.ID), raw)
	m.Claim = nil
	if m.Paused {
		return s.commit(ctx, b, m, false)
	}
	now := s.cfg.Now()
	baseline := m.Version == ""
	if ferr != nil {
		s.failed(b, m, ferr, now)
		return s.commit(ctx, b, m, b.Len() > 0)
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
	confirmed := false
	var st Stats
	n0 := b.Len() // a charge or a health event so far
	switch {
	case m.Version == "":
		b.Set(versionKey(m.ID, ver), []byte(page.Markdown))
		m.Version, m.Hash = ver, hash
	case hash == m.Hash:
		s.unchanged(b, m, &st)
	case m.Pending != nil && hash == m.Pending.Hash:
		if !now.Before(m.Pending.ConfirmAt) {
			if err := s.confirm(ctx, b, m, page, now); err != nil {
				return err
			}
			confirmed = true
			st.Confirmed++
		}
	default:
		old, err := s.st.Get(ctx, versionKey(m.ID, m.Version))
		if err != nil {
			return fmt.Errorf("read version %s: %w", m.Version, err)
		}
		st.Diffs++
		facts := diff.Compare(diff.Parse(string(old)), doc)
		if len(facts) == 0 {
			s.unchanged(b, m, &st)
			break
		}
		st.Changes++
		s.seen(ctx, b, m, ver, hash, page.Markdown, facts, now)
	}
	m.NextAt = now.Add(m.Interval)
	durable := recovered || m.Pending != nil || confirmed || b.Len() > n0+1
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
	// version, schedule and charge without a sync: lost in a crash of the
	// store, the check runs again and is charged then. Changes and events
	// are synced.
	if err := s.commit(ctx, b, m, durable); err != nil {
		return err
	}
	s.count(func(c *Stats) {
		c.Checks++
		c.Unchanged += st.Unchanged
		c.Diffs += st.Diffs
		c.Changes += st.Changes
		c.Confirmed += st.Confirmed
		c.Reverted += st.Reverted
		late := now.Sub(due)
		switch {
		case baseline && late > c.MaxBaselineLate:
			c.MaxBaselineLate = late
		case !baseline && late > c.MaxLate:
			c.MaxLate = late
		}
	})
	return nil
}

func (s *Service) commit(ctx context.Context, b *monstore.Batch, m *Monitor, durable bool) error {
	rec, err := json.Marshal(m)
	if err != nil {
		return err
	}
	b.Set(recordKey(m.ID), rec)
	b.Sync = durable
	return s.st.Apply(ctx, b)
}

// phase is a number in [0, 1) fixed by id.
func phase(id string) float64 {
	sum := sha256.Sum256([]byte(id))
	return float64(uint32(sum[0])<<16|uint32(sum[1])<<8|uint32(sum[2])) / (1 << 24)
}

// unchanged: the page shows the current version's content. A change seen
// and not yet confirmed has reverted: it is dropped from the timeline.
func (s *Service) unchanged(b *monstore.Batch, m *Monitor, st *Stats) {
	st.Unchanged++
	if m.Pending != nil {
		b.Delete(eventKey(m.ID, m.Pending.Event))
		if m.Pending.Version != m.Version {
			b.Delete(versionKey(m.ID, m.Pending.Version))
		}
		m.Pending = nil
		st.Reverted++
	}
	// Quiet pages drift back to the longest wait.
	m.Interval = min(m.EveryD, 2*m.Interval)
}

// seen records a change at first sight: on the timeline at once,
// confirmed by a check after the confirmation delay.
func (s *Service) seen(ctx context.Context, b *monstore.Batch, m *Monitor, ver, hash, md string, facts []diff.Fact, now time.Time) {
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
	e := &Event{ID: n, Event: "change", Monitor: m.ID, URL: m.URL, Matched: s.match(ctx, m, facts),
		Summary: diff.Summary(facts), Facts: facts, FirstSeen: now.UTC().Truncate(time.Second),
		Evidence: &Evidence{Before: evidenceURL(m.ID, m.Version), After: evidenceURL(m.ID, ver)},
		Delivery: &Delivery{}}
	if m.Notify.Webhook != "" {
		e.Delivery.Webhook = &WebhookState{Status: "waiting for confirmation"}
	}
	if m.Notify.Email != "" {
		e.Delivery.Email = &WebhookState{Status: "waiting for confirmation"}
	}
	s.putEvent(b, m.ID, e)
	m.Pending = &Pending{Event: n, Version: ver, Hash: hash, FirstSeen: now.UTC(), ConfirmAt: now.Add(s.cfg.ConfirmAfter)}
}

// confirm: the change is still there after the delay. It becomes the
// current version, is charged when it matched, and its webhook delivery is
// written in the same batch (the sender — the gate's, or the cell's own
// without a gate — sends it from the store).
func (s *Service) confirm(ctx context.Context, b *monstore.Batch, m *Monitor, page *Page, now time.Time) error {
	p := m.Pending
	raw, err := s.st.Get(ctx, eventKey(m.ID, p.Event))
	if err != nil {
		return fmt.Errorf("read event %d: %w", p.Event, err)
	}
	var e Event
	if err := json.Unmarshal(raw, &e); err != nil {
		return err
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
	e.Delivery = &Delivery{Done: m.Notify.Webhook == "" && m.Notify.Email == ""}
	if m.Notify.Email != "" {
		e.Delivery.Email = &WebhookState{Status: "pending"}
	}
	if m.Notify.Webhook != "" {
		e.Delivery.Webhook = &WebhookState{Status: "pending"}
		body, err := json.Marshal(e)
		if err != nil {
			return err
		}
		d := webhook.Delivery{ID: deliveryID(m.ID, e.ID), URL: m.Notify.Webhook, Event: "change",
			Monitor: m.ID, Secret: m.Notify.Secret, Body: body, CreatedAt: now, NextAt: now, Schedule: s.cfg.WebhookRetries}
		if err := webhook.Check(&d, s.cfg.AllowPrivateNetworks); err != nil {
			s.log.Warn("monitor: webhook refused", "monitor", m.ID, "err", err)
			e.Delivery.Webhook = &WebhookState{Status: "failed", At: at.Format(time.RFC3339)}
			e.Delivery.Done = m.Notify.Email == ""
		} else {
			rawd, err := json.Marshal(d)
			if err != nil {
				return err
			}
			b.Set(hookKey(d.ID), rawd)
		}
	}
	if m.Notify.Email != "" {
		sched := s.cfg.WebhookRetries
		if len(sched) == 0 {
			sched = webhook.DefaultSchedule
		}
		mail := monstore.Mail{ID: monstore.MailID(m.ID, e.ID), Monitor: m.ID, Event: e.ID, To: m.Notify.Email,
			Subject: mailSubject(m), Body: mailBody(m, &e), NextAt: now, Schedule: sched}
		raw, err := json.Marshal(mail)
		if err != nil {
			return err
		}
		b.Set([]byte(monstore.MailPrefix+mail.ID), raw)
	}
	s.putEvent(b, m.ID, &e)
	m.Version, m.Hash, m.Pending = p.Version, p.Hash, nil
	// A page that changes is checked more often, down to the minimum.
	m.Interval = max(s.cfg.MinEvery, m.Interval/2)
	return nil
}

func (s *Service) extract(ctx context.Context, md string, schema json.RawMessage) json.RawMessage {
	out, err := s.cfg.Extractor.Extract(ctx, md, schema)
	if err != nil {
		s.log.Warn("monitor: extract custom", "err", err)
		out, _ = ruleExtractor{}.Extract(ctx, md, schema)
	}
	return out
}

// failed: a refused check. Retried with backoff; the third in a row is a
// health event.
func (s *Service) failed(b *monstore.Batch, m *Monitor, err error, now time.Time) {
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

func (s *Service) event(b *monstore.Batch, m *Monitor, e *Event) {
	m.LastEvent++
	e.ID, e.Monitor, e.URL = m.LastEvent, m.ID, m.URL
	s.putEvent(b, m.ID, e)
}

func (s *Service) putEvent(b *monstore.Batch, id string, e *Event) {
	raw, err := json.Marshal(e)
	if err != nil {
		s.log.Error("monitor: encode event", "err", err)
		return
	}
	b.Set(eventKey(id, e.ID), raw)
}

func (s *Service) charge(b *monstore.Batch, c *Charge) {
	raw, _ := json.Marshal(c)
	b.Set(chargeKey(c), raw)
}

// Charges returns up to limit charges waiting for the gate, oldest first.
func (s *Service) Charges(ctx context.Context, limit int) ([]Charge, error) {
	var out []Charge
	err := s.st.Scan(ctx, chargePrefix, nil, func(_, v []byte) (bool, error) {
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
func (s *Service) AckCharges(ctx context.Context, ids []string) (int, error) {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	b := &monstore.Batch{Sync: true}
	err := s.st.Scan(ctx, chargePrefix, nil, func(k, v []byte) (bool, error) {
		var c Charge
		if err := json.Unmarshal(v, &c); err != nil {
			return false, err
		}
		if want[c.ID] {
			b.Delete(k)
		}
		return true, nil
	})
	if err != nil || b.Len() == 0 {
		return 0, err
	}
	return b.Len(), s.st.Apply(ctx, b)
}

// mailSubject and mailBody are a confirmed change's notify.email message:
// plain text, the summary first, then every fact and the evidence.
func mailSubject(m *Monitor) string {
	name := m.Name
	if name == "" {
		name = m.URL
	}
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, "Change on "+name)
}

func mailBody(m *Monitor, e *Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\nPage: %s\nMonitor: %s\n", e.Summary, m.URL, m.ID)
	if m.Watch != "" {
		fmt.Fprintf(&b, "Watching: %s\n", m.Watch)
	}
	if len(e.Matched) > 0 {
		fmt.Fprintf(&b, "Matched: %s\n", strings.Join(e.Matched, ", "))
	}
	b.WriteString("\nChanges:\n")
	for _, f := range e.Facts {
		fmt.Fprintf(&b, "- %s %s", f.Kind, f.Entity)
		if f.Field != "" {
			fmt.Fprintf(&b, " / %s", f.Field)
		}
		if f.Before != "" || f.After != "" {
			fmt.Fprintf(&b, ": %q -> %q", f.Before, f.After)
		}
		b.WriteString("\n")
	}
	if e.ConfirmedAt != nil {
		fmt.Fprintf(&b, "\nFirst seen %s, confirmed %s.\n", e.FirstSeen.Format(time.RFC3339), e.ConfirmedAt.Format(time.RFC3339))
	}
	if e.Evidence != nil {
		fmt.Fprintf(&b, "Before: %s\nAfter: %s\n", e.Evidence.Before, e.Evidence.After)
	}
	return b.String()
}

// match returns the conditions of m that facts satisfy: by the model when
// one is configured, by the rules otherwise or when the model fails.
func (s *Service) match(ctx context.Context, m *Monitor, facts []diff.Fact) []string {
	if s.cfg.Judge != nil && len(m.Conditions) > 0 {
		ids, err := s.cfg.Judge(ctx, m.Conditions, facts)
		if err == nil {
			return ids
		}
		s.log.Warn("monitor: the model could not judge the change; the rules did", "monitor", m.ID, "err", err)
	}
	return watch.Match(m.Conditions, facts)
}
