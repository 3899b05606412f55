package monitor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"sort"
	"strconv"
	"strings"
	"time"

	"crypto/sha256"
	"encoding/hex"

	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/cell/monitor/watch"
	"github.com/trawlhq/trawl/internal/monid"
	"github.com/trawlhq/trawl/internal/monstore"
	"github.com/trawlhq/trawl/internal/urlpolicy"
	"github.com/trawlhq/trawl/internal/webhook"
)

// Notify is where confirmed changes go.
type Notify struct {
	Webhook string `json:"webhook,omitempty"`
	Secret  string `json:"secret,omitempty"`
	Email   string `json:"email,omitempty"`
}

// Request is the body of POST /monitors and PATCH /monitors/{id}
// (hosted-api §2.9). Absent fields are nil.
type Request struct {
	URL    *string         `json:"url"`
	Watch  *string         `json:"watch"`
	Every  *string         `json:"every"`
	Notify *Notify         `json:"notify"`
	Schema json.RawMessage `json:"schema"`
	Name   *string         `json:"name"`
	Region *string         `json:"region"`
	Paused *bool           `json:"paused"`
}

// Monitor is a monitor's record.
type Monitor struct {
	ID         string            `json:"id"`
	Account    string            `json:"account"`
	URL        string            `json:"url"`
	Host       string            `json:"host"`
	Watch      string            `json:"watch"`
	Conditions []watch.Condition `json:"conditions"`
	Every      string            `json:"every"`
	EveryD     time.Duration     `json:"every_ns"`
	Notify     Notify            `json:"notify"`
	Schema     json.RawMessage   `json:"schema,omitempty"`
	Name       string            `json:"name,omitempty"`
	Region     string            `json:"region"`
	Paused     bool              `json:"paused,omitempty"`
	CreatedAt  time.Time         `json:"created_at"`

	Health        string `json:"health"`
	HealthMessage string `json:"health_message,omitempty"`
	// Version is the current (last confirmed) version and Hash its
	// content hash (diff.Hash); "" until the baseline.
	Version string `json:"version,omitempty"`
	Hash    string `json:"hash,omitempty"`

	// Schedule.
	NextAt      time.Time     `json:"next_at"`
	Interval    time.Duration `json:"interval_ns"` // adaptive: at most EveryD
	BilledUntil time.Time     `json:"billed_until"`
	Fails       int           `json:"fails,omitempty"`
	Pending     *Pending      `json:"pending,omitempty"`
	LastEvent   int64         `json:"last_event,omitempty"`
	// Claim is the cell checking it now (internal/monstore).
	Claim *monstore.Claim `json:"claim,omitempty"`
}

// Pending is a change seen and not yet confirmed.
type Pending struct {
	Event     int64     `json:"event"`
	Version   string    `json:"version"`
	Hash      string    `json:"hash"`
	FirstSeen time.Time `json:"first_seen"`
	ConfirmAt time.Time `json:"confirm_at"`
}

// View is the monitor response of hosted-api §2.9.
type View struct {
	ID         string          `json:"id"`
	Created    bool            `json:"created"`
	URL        string          `json:"url"`
	Watch      string          `json:"watch"`
	Conditions Conditions      `json:"conditions"`
	Every      string          `json:"every"`
	Region     string          `json:"region"`
	Health     string          `json:"health"`
	Baseline   Baseline        `json:"baseline"`
	Cost       Cost            `json:"cost"`
	Name       string          `json:"name,omitempty"`
	Paused     bool            `json:"paused"`
	Notify     *NotifyView     `json:"notify,omitempty"`
	Schema     json.RawMessage `json:"schema,omitempty"`
	CreatedAt  string          `json:"created_at"`
	NextCheck  string          `json:"next_check_at,omitempty"`
}

// Conditions is {"any": [...]}.
type Conditions struct {
	Any []watch.Condition `json:"any"`
}

// Baseline is {status, version}.
type Baseline struct {
	Status  string `json:"status"`
	Version string `json:"version,omitempty"`
}

// Cost is {per_change_credits}.
type Cost struct {
	PerChangeCredits int `json:"per_change_credits"`
}

// NotifyView shows notify without the secret.
type NotifyView struct {
	Webhook string `json:"webhook,omitempty"`
	Secret  bool   `json:"secret,omitempty"`
	Email   string `json:"email,omitempty"`
}

func (m *Monitor) view(created bool) *View {
	v := &View{ID: m.ID, Created: created, URL: m.URL, Watch: m.Watch, Conditions: Conditions{Any: m.Conditions},
		Every: m.Every, Region: m.Region, Health: m.Health, Baseline: Baseline{Status: "pending"},
		Cost: Cost{PerChangeCredits: PerChangeCredits}, Name: m.Name, Paused: m.Paused, Schema: m.Schema,
		CreatedAt: m.CreatedAt.UTC().Format(time.RFC3339)}
	if v.Conditions.Any == nil {
		v.Conditions.Any = []watch.Condition{}
	}
	if m.Version != "" {
		v.Baseline = Baseline{Status: "ok", Version: m.Version}
	}
	if m.Notify != (Notify{}) {
		v.Notify = &NotifyView{Webhook: m.Notify.Webhook, Secret: m.Notify.Secret != "", Email: m.Notify.Email}
	}
	if !m.Paused && !m.NextAt.IsZero() {
		v.NextCheck = m.NextAt.UTC().Format(time.RFC3339)
	}
	return v
}

// Keys of the region's monitor store (internal/monstore).
func recordKey(id string) []byte { return monstore.RecordKey(id) }
func versionKey(id, v string) []byte {
	return []byte(monstore.VersionPrefix + id + "/" + v)
}
func eventPrefix(id string) []byte         { return []byte(monstore.EventPrefix + id + "/") }
func eventKey(id string, n int64) []byte   { return monstore.EventKey(id, n) }
func accountPrefix(account string) []byte  { return []byte(monstore.AccountPrefix + account + "/") }
func accountKey(account, id string) []byte { return append(accountPrefix(account), id...) }
func hostPrefix(host string) []byte        { return []byte(monstore.HostPrefix + host + "/") }
func hostKey(host, id string) []byte       { return append(hostPrefix(host), id...) }
func hookKey(delivery string) []byte       { return []byte(monstore.HookPrefix + delivery) }
func sameKey(account, u, watch string) []byte {
	sum := sha256.Sum256([]byte(u + "\n" + watch))
	return []byte(monstore.SamePrefix + account + "/" + hex.EncodeToString(sum[:12]))
}

// fast is whether a monitor counts against the limit of monitors checked
// more often than hourly.
func (m *Monitor) fast() bool { return m.EveryD < time.Hour && !m.Paused }

// accountEntry is the value of an account index key.
type accountEntry struct {
	Fast bool `json:"fast,omitempty"`
}

func (m *Monitor) accountEntry() []byte {
	b, _ := json.Marshal(accountEntry{Fast: m.fast()})
	return b
}

// retries bounds the read-modify-write loops that meet a conflict.
const retries = 8

// parseEvery reads `every`: the spec's values and any Go duration.
func (s *Service) parseEvery(e string) (time.Duration, error) {
	var d time.Duration
	switch e {
	case "1d":
		d = 24 * time.Hour
	case "1w":
		d = 7 * 24 * time.Hour
	default:
		v, err := time.ParseDuration(e)
		if err != nil || v <= 0 {
			return 0, badInput("every must be one of 4m, 15m, 1h, 6h, 1d, 1w or a duration such as 30m")
		}
		d = v
	}
	if d < s.cfg.MinEvery {
		return 0, badInput("every must be at least " + fmtDuration(s.cfg.MinEvery))
	}
	return d, nil
}

// fmtDuration writes 4m0s as 4m, 1h0m0s as 1h.
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

var regions = map[string]bool{"eu": true, "sin": true, "us": true}

func (s *Service) checkURL(ctx context.Context, raw string) (string, string, error) {
	u, err := urlpolicy.Validate(raw, s.cfg.AllowPrivateNetworks)
	switch {
	case errors.Is(err, fetch.ErrScheme) && strings.Contains(raw, ":") && !strings.ContainsAny(raw, " \t"):
		return "", "", badInput("url must start with http:// or https://")
	case errors.Is(err, fetch.ErrNotPublic):
		return "", "", badInput("url host is not public")
	case err != nil:
		return "", "", badInput("url is not valid")
	}
	if s.cfg.CheckHost != nil {
		if err := s.cfg.CheckHost(ctx, u.Hostname()); errors.Is(err, fetch.ErrNotPublic) {
			return "", "", badInput("url host is not public")
		}
	}
	return u.String(), strings.ToLower(u.Hostname()), nil
}

func (s *Service) checkNotify(n *Notify) error {
	if n.Webhook != "" {
		if err := webhook.Check(&webhook.Delivery{URL: n.Webhook}, s.cfg.AllowPrivateNetworks); err != nil {
			switch {
			case errors.Is(err, fetch.ErrScheme):
				return badInput("notify.webhook: url must start with http:// or https://")
			case errors.Is(err, fetch.ErrNotPublic):
				return badInput("notify.webhook: url host is not public")
			}
			return badInput("notify.webhook: url is not valid")
		}
	}
	if len(n.Secret) > 256 {
		return badInput("notify.secret: at most 256 characters")
	}
	if n.Email != "" {
		if a, err := mail.ParseAddress(n.Email); err != nil || a.Address != n.Email {
			return badInput("notify.email is not an e-mail address")
		}
	}
	return nil
}

func checkSchema(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if len(raw) > 64<<10 {
		return nil, badInput("schema: at most 64 KiB")
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, badInput("schema must be a JSON object")
	}
	return raw, nil
}

// Create makes a monitor for account, or returns the one it already has
// for the same url and watch (created false).
func (s *Service) Create(ctx context.Context, account string, req *Request) (*View, error) {
	if req.Paused != nil {
		return nil, badInput("paused is set with PATCH only")
	}
	if req.URL == nil || *req.URL == "" {
		return nil, badInput("url is not valid")
	}
	u, host, err := s.checkURL(ctx, *req.URL)
	if err != nil {
		return nil, err
	}
	every := DefaultEvery
	if req.Every != nil && *req.Every != "" {
		every = *req.Every
	}
	everyD, err := s.parseEvery(every)
	if err != nil {
		return nil, err
	}
	m := &Monitor{Account: account, URL: u, Host: host, Every: every, EveryD: everyD, Interval: everyD, Region: s.cfg.Region, Health: "ok"}
	if req.Watch != nil {
		m.Watch = strings.TrimSpace(*req.Watch)
		if len(m.Watch) > 4096 {
			return nil, badInput("watch: at most 4096 characters")
		}
	}
	if req.Notify != nil {
		if err := s.checkNotify(req.Notify); err != nil {
			return nil, err
		}
		m.Notify = *req.Notify
	}
	if m.Schema, err = checkSchema(req.Schema); err != nil {
		return nil, err
	}
	if req.Name != nil {
		if len(*req.Name) > 200 {
			return nil, badInput("name: at most 200 characters")
		}
		m.Name = *req.Name
	}
	if req.Region != nil && *req.Region != "" {
		if !regions[*req.Region] && *req.Region != s.cfg.Region {
			return nil, badInput("region must be eu, sin or us")
		}
		m.Region = *req.Region
	}
	// The same url and watch: the existing monitor.
	same := sameKey(account, m.URL, m.Watch)
	if v, err := s.sameMonitor(ctx, account, same); v != nil || err != nil {
		return v, err
	}
	mine, fast, err := s.counts(ctx, account, "")
	if err != nil {
		return nil, err
	}
	onHost := 0
	if err := s.st.Scan(ctx, hostPrefix(m.Host), nil, func(_, _ []byte) (bool, error) { onHost++; return true, nil }); err != nil {
		return nil, err
	}
	switch {
	case mine >= s.cfg.Limits.Account:
		return nil, limitError(fmt.Sprintf("at most %d monitors per account", s.cfg.Limits.Account))
	case m.EveryD < time.Hour && fast >= s.cfg.Limits.Fast:
		return nil, limitError(fmt.Sprintf("at most %d running monitors checked more often than every 1h per account", s.cfg.Limits.Fast))
	case onHost >= s.cfg.Limits.Host:
		return nil, limitError("this site has too many monitors already")
	}
	if m.Watch != "" {
		conds, err := s.cfg.Split(ctx, m.Watch)
		if err != nil {
			return nil, ErrSentence
		}
		m.Conditions = conds
	}
	now := s.cfg.Now()
	m.ID = monid.New(s.cfg.Region)
	m.CreatedAt = now.UTC()
	m.NextAt = now // the baseline: the next tick
	rec, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	b := &monstore.Batch{Sync: true, Slot: s.slot("add", m)}
	b.Require(same, nil)
	b.Set(recordKey(m.ID), rec)
	b.Set(accountKey(account, m.ID), m.accountEntry())
	b.Set(hostKey(m.Host, m.ID), nil)
	b.Set(same, []byte(m.ID))
	switch err := s.st.Apply(ctx, b); {
	case errors.Is(err, monstore.ErrConflict):
		// Created meanwhile, by another request (at another cell).
		if v, err := s.sameMonitor(ctx, account, same); v != nil || err != nil {
			return v, err
		}
		return nil, err
	case err != nil:
		return nil, storeError(err)
	}
	s.Kick()
	return m.view(true), nil
}

// slot is the account-wide limits' change that a write of m makes.
func (s *Service) slot(op string, m *Monitor) *monstore.Slot {
	l := s.cfg.Limits
	return &monstore.Slot{Op: op, Monitor: m.ID, Account: m.Account, Host: m.Host, Fast: m.fast(),
		Limits: monstore.Limits{Account: l.Account, Fast: l.Fast, Host: l.Host}}
}

// storeError turns the account-wide limits' refusal into the spec's 429.
func storeError(err error) error {
	var le *monstore.LimitError
	if errors.As(err, &le) {
		return limitError(le.Message)
	}
	return err
}

// sameMonitor returns the account's monitor that key names, if any.
func (s *Service) sameMonitor(ctx context.Context, account string, key []byte) (*View, error) {
	id, err := s.st.Get(ctx, key)
	if errors.Is(err, monstore.ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	m, _, err := s.owned(ctx, account, string(id))
	if errors.Is(err, ErrNoMonitor) {
		return nil, nil // deleted meanwhile
	} else if err != nil {
		return nil, err
	}
	return m.view(false), nil
}

// counts returns how many monitors account has and how many of them are
// fast, leaving out except.
func (s *Service) counts(ctx context.Context, account, except string) (all, fast int, err error) {
	p := accountPrefix(account)
	err = s.st.Scan(ctx, p, nil, func(k, v []byte) (bool, error) {
		if string(k[len(p):]) == except {
			return true, nil
		}
		var e accountEntry
		json.Unmarshal(v, &e)
		all++
		if e.Fast {
			fast++
		}
		return true, nil
	})
	return all, fast, err
}

// List returns account's monitors, newest first.
func (s *Service) List(ctx context.Context, account string) ([]*View, error) {
	var ids []string
	p := accountPrefix(account)
	if err := s.st.Scan(ctx, p, nil, func(k, _ []byte) (bool, error) {
		ids = append(ids, string(k[len(p):]))
		return true, nil
	}); err != nil {
		return nil, err
	}
	var mine []*Monitor
	for _, id := range ids {
		m, _, err := s.get(ctx, id)
		if errors.Is(err, monstore.ErrNotFound) {
			continue // deleted meanwhile
		} else if err != nil {
			return nil, err
		}
		if m.Account == account {
			mine = append(mine, m)
		}
	}
	sort.SliceStable(mine, func(i, j int) bool {
		if !mine[i].CreatedAt.Equal(mine[j].CreatedAt) {
			return mine[i].CreatedAt.After(mine[j].CreatedAt)
		}
		return mine[i].ID > mine[j].ID
	})
	out := make([]*View, 0, len(mine))
	for _, m := range mine {
		out = append(out, m.view(false))
	}
	return out, nil
}

// Get returns account's monitor id.
func (s *Service) Get(ctx context.Context, account, id string) (*View, error) {
	m, _, err := s.owned(ctx, account, id)
	if err != nil {
		return nil, err
	}
	return m.view(false), nil
}

// Patch changes watch, every, notify, schema, name or paused.
func (s *Service) Patch(ctx context.Context, account, id string, req *Request) (*View, error) {
	if req.URL != nil {
		return nil, badInput("url cannot be changed; create another monitor")
	}
	if req.Region != nil {
		return nil, badInput("region cannot be changed; create another monitor")
	}
	// Check everything before changing anything.
	var everyD time.Duration
	if req.Every != nil {
		d, err := s.parseEvery(*req.Every)
		if err != nil {
			return nil, err
		}
		everyD = d
	}
	if req.Notify != nil {
		if err := s.checkNotify(req.Notify); err != nil {
			return nil, err
		}
	}
	schema, err := checkSchema(req.Schema)
	if err != nil {
		return nil, err
	}
	if req.Name != nil && len(*req.Name) > 200 {
		return nil, badInput("name: at most 200 characters")
	}
	var conds []watch.Condition
	if req.Watch != nil {
		w := strings.TrimSpace(*req.Watch)
		if len(w) > 4096 {
			return nil, badInput("watch: at most 4096 characters")
		}
		if w != "" {
			if conds, err = s.cfg.Split(ctx, w); err != nil {
				return nil, ErrSentence
			}
		}
	}
	for range retries {
		m, raw, err := s.owned(ctx, account, id)
		if err != nil {
			return nil, err
		}
		wasFast, oldSame := m.fast(), sameKey(account, m.URL, m.Watch)
		becomesFast := (req.Every != nil && everyD < time.Hour && (m.EveryD >= time.Hour || m.Paused)) ||
			(req.Paused != nil && !*req.Paused && m.Paused && m.EveryD < time.Hour && req.Every == nil)
		if becomesFast {
			_, fast, err := s.counts(ctx, account, id)
			if err != nil {
				return nil, err
			}
			if fast >= s.cfg.Limits.Fast {
				return nil, limitError(fmt.Sprintf("at most %d running monitors checked more often than every 1h per account", s.cfg.Limits.Fast))
			}
		}
		now := s.cfg.Now()
		if req.Watch != nil {
			m.Watch, m.Conditions = strings.TrimSpace(*req.Watch), conds
		}
		if req.Every != nil {
			m.Every, m.EveryD, m.Interval = *req.Every, everyD, everyD
			if next := now.Add(everyD); m.NextAt.After(next) {
				m.NextAt = next
			}
		}
		if req.Notify != nil {
			m.Notify = *req.Notify
		}
		if req.Schema != nil {
			m.Schema = schema
		}
		if req.Name != nil {
			m.Name = *req.Name
		}
		if req.Paused != nil && *req.Paused != m.Paused {
			m.Paused = *req.Paused
			if !m.Paused {
				m.NextAt = now // checked again at once; a new window is billed
			}
		}
		rec, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		b := &monstore.Batch{Sync: true}
		if m.fast() != wasFast {
			b.Slot = s.slot("set", m)
		}
		b.Require(recordKey(id), raw)
		b.Set(recordKey(id), rec)
		b.Set(accountKey(account, id), m.accountEntry())
		if newSame := sameKey(account, m.URL, m.Watch); !bytes.Equal(newSame, oldSame) {
			b.Delete(oldSame)
			b.Set(newSame, []byte(id))
		}
		err = s.st.Apply(ctx, b)
		if errors.Is(err, monstore.ErrConflict) {
			continue // a check or another patch wrote it meanwhile: again
		} else if err != nil {
			return nil, storeError(err)
		}
		s.Kick()
		return m.view(false), nil
	}
	return nil, ErrBusy
}

// Delete removes account's monitor with its versions and timeline.
func (s *Service) Delete(ctx context.Context, account, id string) error {
	m, _, err := s.owned(ctx, account, id)
	if err != nil {
		return err
	}
	b := &monstore.Batch{Sync: true, Slot: s.slot("remove", m)}
	b.Delete(recordKey(id))
	b.Delete(accountKey(account, id))
	b.Delete(hostKey(m.Host, id))
	same := sameKey(account, m.URL, m.Watch)
	if v, err := s.st.Get(ctx, same); err == nil && string(v) == id {
		b.Delete(same)
	}
	b.DeletePrefix([]byte(monstore.VersionPrefix + id + "/"))
	b.DeletePrefix(eventPrefix(id))
	return storeError(s.st.Apply(ctx, b))
}

// Events returns account's monitor's timeline, oldest first, from since
// (zero: the beginning), at most limit events.
func (s *Service) Events(ctx context.Context, account, id string, since time.Time, limit int) ([]*Event, error) {
	if _, _, err := s.owned(ctx, account, id); err != nil {
		return nil, err
	}
	out := []*Event{}
	err := s.st.Scan(ctx, eventPrefix(id), nil, func(_, v []byte) (bool, error) {
		var e Event
		if err := json.Unmarshal(v, &e); err != nil {
			return false, err
		}
		if !since.IsZero() && e.time().Before(since) {
			return true, nil
		}
		out = append(out, &e)
		return len(out) < limit, nil
	})
	if err != nil {
		return nil, err
	}
	// A delivery in progress: its attempts so far.
	for _, e := range out {
		if e.Delivery == nil || e.Delivery.Webhook == nil || e.Delivery.Done {
			continue
		}
		raw, err := s.st.Get(ctx, hookKey(deliveryID(id, e.ID)))
		if err != nil {
			continue
		}
		var d webhook.Delivery
		if json.Unmarshal(raw, &d) != nil {
			continue
		}
		e.Delivery.Webhook.Attempts = d.Attempts
		if d.Attempts > 0 {
			e.Delivery.Webhook.Status = "retrying"
			e.Delivery.Webhook.At = d.NextAt.UTC().Format(time.RFC3339)
			e.Delivery.Webhook.Code = d.LastStatus
		}
	}
	return out, nil
}

// ParseSince reads the events call's since: ISO 8601 or unix seconds.
func ParseSince(v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
		return time.Unix(n, 0), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, badInput("since must be an ISO 8601 time or unix seconds")
}

// ParseLimit reads the events call's limit: 1 to 500, default 100.
func ParseLimit(v string) (int, error) {
	if v == "" {
		return 100, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 500 {
		return 0, badInput("limit must be 1 to 500")
	}
	return n, nil
}

// Version returns the page of account's monitor at version, as Markdown.
func (s *Service) Version(ctx context.Context, account, id, version string) (string, error) {
	if _, _, err := s.owned(ctx, account, id); err != nil {
		return "", err
	}
	if version == "" || strings.ContainsAny(version, "/\x00") {
		return "", ErrNoVersion
	}
	v, err := s.st.Get(ctx, versionKey(id, version))
	if errors.Is(err, monstore.ErrNotFound) {
		return "", ErrNoVersion
	}
	return string(v), err
}

// owned reads monitor id, and its record as stored, if account owns it;
// another account's is 404.
func (s *Service) owned(ctx context.Context, account, id string) (*Monitor, []byte, error) {
	m, raw, err := s.get(ctx, id)
	if errors.Is(err, monstore.ErrNotFound) || err == nil && m.Account != account {
		return nil, nil, ErrNoMonitor
	}
	return m, raw, err
}

func (s *Service) get(ctx context.Context, id string) (*Monitor, []byte, error) {
	v, err := s.st.Get(ctx, recordKey(id))
	if err != nil {
		return nil, nil, err
	}
	var m Monitor
	if err := json.Unmarshal(v, &m); err != nil {
		return nil, nil, fmt.Errorf("monitor %s: %w", id, err)
	}
	return &m, v, nil
}
