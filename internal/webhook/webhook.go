// Package webhook delivers signed webhook POSTs durably: a delivery is
// written to Pebble before Send returns, attempted at once, retried on
// the ladder of docs/spec/hosted-api.md §6 (1 m, 5 m, 30 m, 2 h, 12 h,
// then given up) and removed once a receiver answers 2xx. A process that
// restarts on the same store resumes its pending deliveries, so delivery is
// at least once: a receiver deduplicates on the x-svc-delivery header.
//
// Every connection goes through the SSRF guard of cell/fetch: the URL is
// validated when the delivery is accepted, and the address is checked
// again at dial time, after name resolution, so a name that resolves to a
// private address is refused unless private networks are allowed.
// Redirects are not followed (a 3xx is a failed attempt).
//
// Signature (hosted-api §6): x-svc-timestamp is the attempt's Unix time in
// seconds and, when the delivery has a secret, x-svc-signature is
// "sha256=" and the hex HMAC-SHA256, keyed with the secret, of the
// timestamp, ".", and the raw body. Verify checks one. A delivery may
// carry a second signature in a header of its own (Delivery.BodySignature:
// Firecrawl's X-Firecrawl-Signature), over the raw body alone, made when
// it is accepted; VerifyBody checks one.
//
// A delivery is accepted by Send, which stores it at once, or by Stage,
// which adds it to a caller's batch so that it is committed with whatever
// owes it (a job's event) or not at all; the caller Kicks after the
// commit.
//
// Time runs on Config.Now; a Sender looks for due deliveries when one is
// sent, when Kick is called and on a real timer, so tests move a fake clock
// and Kick instead of waiting.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/internal/urlpolicy"
)

// DefaultSchedule is the retry ladder of hosted-api §6: the waits after
// the first attempt, the second, and so on; after the last the delivery is
// given up.
var DefaultSchedule = []time.Duration{time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 12 * time.Hour}

// Defaults of Config.
const (
	DefaultTimeout  = 10 * time.Second
	DefaultParallel = 4
	// MaxBody bounds a delivery's body.
	MaxBody = 32 << 20
	// MaxHeaders bounds a delivery's own headers (its body signature's
	// included).
	MaxHeaders = 20
)

// Errors of Send, to be tested with errors.Is.
var (
	// ErrBadDelivery is a delivery that cannot be sent: its URL, a
	// header, or its size. The error's text says which.
	ErrBadDelivery = errors.New("webhook delivery refused")
	// ErrClosed is Send after Close.
	ErrClosed = errors.New("webhook sender is closed")
)

// Config configures a Sender.
type Config struct {
	// Prefix is the store range of the deliveries; required (a constant
	// of internal/store).
	Prefix string
	// DuePrefix, when set, is a second store range (a constant of
	// internal/store) where the sender indexes its deliveries by the
	// time they are due, so a look for due deliveries reads only those
	// and no body: for senders that may hold many pending deliveries (a
	// crawl's pages while its receiver is down). Every delivery of such a
	// sender must be accepted by Send or Stage. Without it each look
	// reads every pending delivery.
	DuePrefix string
	// AllowPrivateNetworks lets deliveries go to loopback and private
	// addresses (local use and tests only).
	AllowPrivateNetworks bool
	// Schedule is the retry ladder; nil means DefaultSchedule.
	Schedule []time.Duration
	// Timeout bounds one attempt (connect, send, answer). Default 10 s.
	Timeout time.Duration
	// Parallel bounds the attempts in flight. Default 4.
	Parallel int
	// Now is the clock of the schedule; default time.Now.
	Now func() time.Time
	// OnFinish, when set, is called once per delivery that succeeded or
	// was given up, with its final state.
	OnFinish func(Delivery)
	// Settled, when set, is asked before each attempt whether the
	// delivery was made elsewhere (another cell's sender, acting for
	// this one): a settled delivery is removed unsent, without
	// OnFinish.
	Settled func(Delivery) bool
	Logger  *slog.Logger

	public func(netip.Addr) bool // tests: the guard's notion of public
}

// Delivery is one webhook POST and its state. The sender owns a delivery
// once it is sent.
type Delivery struct {
	// ID names the delivery (x-svc-delivery); Send fills it.
	ID string `json:"id"`
	// URL receives the POST.
	URL string `json:"url"`
	// Event is sent as x-svc-event.
	Event string `json:"event,omitempty"`
	// Monitor, when set, is sent as x-svc-monitor (hosted-api §6).
	Monitor string `json:"monitor,omitempty"`
	// Secret, when set, signs the delivery. It is stored with the
	// delivery (retries after a restart must sign too) and never logged.
	Secret string `json:"secret,omitempty"`
	// Header holds extra request headers (x-svc-* and hop-by-hop ones are
	// refused).
	Header map[string]string `json:"header,omitempty"`
	// BodySignature, when set with Secret, names a header that Send or
	// Stage sets to SignBody(Secret, Body): "sha256=" and the hex
	// HMAC-SHA256 of the raw body alone, without a timestamp (Firecrawl's
	// X-Firecrawl-Signature). It is made once, kept in Header, and the
	// same on every attempt; it replaces a header of that name.
	BodySignature string `json:"body_signature,omitempty"`
	// Body is the JSON body, sent as is.
	Body json.RawMessage `json:"body"`
	// Group, when set, sends the deliveries of a group one at a time:
	// with Config.DuePrefix in the order they are due, then of their ids
	// (a job's events arrive in the order they happened). A delivery
	// that fails waits for its retry without holding back the next of
	// its group.
	Group string `json:"group,omitempty"`
	// Schedule, when set, is this delivery's retry ladder instead of the
	// sender's (a monitor's delivery carries its cell's ladder to the
	// gate that sends it).
	Schedule []time.Duration `json:"schedule,omitempty"`
	// Tag is the caller's own name for the delivery, kept with it and
	// handed back to Config.OnFinish; it is not sent.
	Tag string `json:"tag,omitempty"`

	// Attempts made so far, the status of the last one (0 when it got
	// no answer) and why it failed.
	Attempts   int       `json:"attempts"`
	LastStatus int       `json:"last_status,omitempty"`
	LastError  string    `json:"last_error,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	NextAt     time.Time `json:"next_at"`
	// Delivered is set on the final state of a delivery a receiver took;
	// GaveUp on one whose retries ran out.
	Delivered bool `json:"delivered,omitempty"`
	GaveUp    bool `json:"gave_up,omitempty"`
}

// Sender sends deliveries. Create it with New, start it with Run, stop it
// with Close. It is safe for concurrent use.
type Sender struct {
	cfg    Config
	st     *store.Store
	prefix []byte
	dueIdx []byte // Config.DuePrefix; nil without the index
	// duePass bounds the deliveries one look reads from the due index
	// (maxDuePass; tests make it small).
	duePass int
	client  *http.Client
	log     *slog.Logger
	wake    chan struct{}

	mu       sync.Mutex
	inflight map[string]bool
	groups   map[string]bool // the groups with a delivery in flight
	closed   bool
	wg       sync.WaitGroup
	slots    chan struct{}
	// stats: attempts that failed, deliveries given up (metrics).
	failedAttempts, gaveUp atomic.Int64
}

// Failures are the attempts that failed and the deliveries given up since
// the sender started (docs/operations.md, "Metrics").
func (s *Sender) Failures() (attempts, gaveUp int64) {
	return s.failedAttempts.Load(), s.gaveUp.Load()
}

// New returns a sender keeping its deliveries in st under cfg.Prefix.
// Deliveries a previous run left pending are sent by Run.
func New(st *store.Store, cfg Config) (*Sender, error) {
	if cfg.Prefix == "" {
		return nil, errors.New("webhook: Config.Prefix is required")
	}
	if cfg.Schedule == nil {
		cfg.Schedule = DefaultSchedule
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = DefaultParallel
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.public == nil {
		cfg.public = urlpolicy.IsPublic
	}
	s := &Sender{cfg: cfg, st: st, prefix: []byte(cfg.Prefix), log: cfg.Logger, wake: make(chan struct{}, 1),
		inflight: map[string]bool{}, groups: map[string]bool{}, slots: make(chan struct{}, cfg.Parallel)}
	if cfg.DuePrefix != "" {
		s.dueIdx, s.duePass = []byte(cfg.DuePrefix), maxDuePass
	}
	dialer := &net.Dialer{Timeout: cfg.Timeout, ControlContext: s.checkDial}
	s.client = &http.Client{
		Timeout: cfg.Timeout,
		Transport: &http.Transport{
			Proxy:               nil, // never a proxy from the environment: the guard must see the receiver
			DialContext:         dialer.DialContext,
			ForceAttemptHTTP2:   true,
			TLSHandshakeTimeout: cfg.Timeout,
			MaxIdleConnsPerHost: 2,
			IdleConnTimeout:     30 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return s, nil
}

// checkDial is the guard at dial time: the address about to be connected,
// after resolution.
func (s *Sender) checkDial(_ context.Context, network, address string, _ syscall.RawConn) error {
	if s.cfg.AllowPrivateNetworks {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot check %s address %q", urlpolicy.ErrNotPublic, network, address)
	}
	if !s.cfg.public(ap.Addr()) {
		return fmt.Errorf("%w: refused to connect to %s", urlpolicy.ErrNotPublic, ap.Addr())
	}
	return nil
}

// refusedHeaders are headers a delivery may not set: the signature's,
// and what the transport owns.
var refusedHeaders = map[string]bool{"Host": true, "Content-Length": true, "Content-Type": true, "Connection": true,
	"Transfer-Encoding": true, "Te": true, "Trailer": true, "Upgrade": true, "Keep-Alive": true, "Proxy-Authorization": true,
	"Proxy-Connection": true, "Expect": true}

// Check reports whether d could be sent: its URL (scheme, host, and an
// address that is public unless private networks are allowed), its
// headers and its size. Callers that accept a webhook from a user check it
// first, to answer 400 rather than fail later.
func Check(d *Delivery, allowPrivate bool) error {
	if _, err := urlpolicy.Validate(d.URL, allowPrivate); err != nil {
		return fmt.Errorf("%w: url: %w", ErrBadDelivery, err)
	}
	if len(d.Header) > MaxHeaders {
		return fmt.Errorf("%w: %d headers, at most %d", ErrBadDelivery, len(d.Header), MaxHeaders)
	}
	for k, v := range d.Header {
		ck := http.CanonicalHeaderKey(k)
		if k == "" || strings.ContainsAny(k, " \t\r\n:") || strings.ContainsAny(v, "\r\n") || len(v) > 4096 {
			return fmt.Errorf("%w: header %q is not a valid header", ErrBadDelivery, k)
		}
		if refusedHeaders[ck] || strings.HasPrefix(strings.ToLower(k), "x-svc-") {
			return fmt.Errorf("%w: header %q is set by the sender", ErrBadDelivery, k)
		}
	}
	if len(d.Body) > MaxBody {
		return fmt.Errorf("%w: body of %d bytes, at most %d", ErrBadDelivery, len(d.Body), MaxBody)
	}
	if len(d.Body) > 0 && !json.Valid(d.Body) {
		return fmt.Errorf("%w: body is not JSON", ErrBadDelivery)
	}
	return nil
}

// Send accepts a delivery: it is checked, stored (synced to disk) and
// attempted at once by Run. It returns the delivery's id. A delivery
// whose id is pending already is left as it is.
func (s *Sender) Send(d Delivery) (string, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if err := s.accept(&d); err != nil {
		return "", err
	}
	if closed {
		return "", ErrClosed
	}
	// A delivery already pending under its id is kept as it is (its
	// attempts and its place in the due index).
	if _, ok, err := s.current(d.ID); err != nil || ok {
		return d.ID, err
	}
	b := s.st.NewBatch()
	defer b.Discard()
	if err := s.write(b, &d, time.Time{}); err != nil {
		return "", fmt.Errorf("webhook: store delivery: %w", err)
	}
	if err := b.Commit(store.Sync); err != nil {
		return "", fmt.Errorf("webhook: store delivery: %w", err)
	}
	s.Kick()
	return d.ID, nil
}

// Stage accepts a delivery as Send does, but writes it into b, the
// caller's batch, and sends nothing: the delivery exists once b is
// committed, and is attempted when Run next looks (Kick after the
// commit). It returns the delivery's id. A sender that is closed still
// stages (the delivery waits in the store for the next Run). b is not
// safe for concurrent use: the caller holds it.
func (s *Sender) Stage(b *store.Batch, d Delivery) (string, error) {
	if err := s.accept(&d); err != nil {
		return "", err
	}
	if err := s.write(b, &d, time.Time{}); err != nil {
		return "", fmt.Errorf("webhook: stage delivery: %w", err)
	}
	return d.ID, nil
}

// accept checks d and makes it a new delivery: its id (unless it has
// one), due now, and its body signature.
func (s *Sender) accept(d *Delivery) error {
	if d.BodySignature != "" && d.Secret != "" {
		h := make(map[string]string, len(d.Header)+1)
		for k, v := range d.Header {
			if !strings.EqualFold(k, d.BodySignature) {
				h[k] = v
			}
		}
		h[d.BodySignature] = SignBody(d.Secret, d.Body)
		d.Header = h
	}
	if err := Check(d, s.cfg.AllowPrivateNetworks); err != nil {
		return err
	}
	if d.ID == "" {
		d.ID = newID()
	}
	now := s.cfg.Now()
	d.CreatedAt, d.NextAt, d.Attempts = now, now, 0
	return nil
}

// Kick makes Run look for due deliveries now (after a clock moved).
func (s *Sender) Kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Pending lists the deliveries not yet delivered nor given up.
func (s *Sender) Pending() ([]Delivery, error) {
	var out []Delivery
	err := s.st.Scan(s.prefix, nil, func(_, v []byte) (bool, error) {
		var d Delivery
		if err := json.Unmarshal(v, &d); err != nil {
			return false, err
		}
		out = append(out, d)
		return true, nil
	})
	return out, err
}

// Run sends due deliveries until ctx ends, waiting for in-flight attempts
// before it returns.
func (s *Sender) Run(ctx context.Context) {
	defer s.wg.Wait()
	// The real timer is a backstop for the schedule; with a fake clock
	// the caller Kicks.
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		next := s.sendDue(ctx)
		wait := time.Minute
		if !next.IsZero() {
			wait = min(max(next.Sub(s.cfg.Now()), 10*time.Millisecond), time.Minute)
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-t.C:
		}
	}
}

// Close refuses further Sends. Run ends with its context.
func (s *Sender) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}

// sendDue starts an attempt for every due delivery not in flight and
// returns the earliest time a pending one is due next (zero: none).
func (s *Sender) sendDue(ctx context.Context) time.Time {
	now := s.cfg.Now()
	pending, next, err := s.due(now)
	if err != nil {
		s.log.Error("webhook: read pending deliveries", "err", err)
		return now.Add(time.Minute)
	}
	for _, d := range pending {
		if d.NextAt.After(now) {
			if next.IsZero() || d.NextAt.Before(next) {
				next = d.NextAt
			}
			continue
		}
		s.mu.Lock()
		busy := s.inflight[d.ID] || (d.Group != "" && s.groups[d.Group])
		if !busy {
			s.inflight[d.ID] = true
			if d.Group != "" {
				s.groups[d.Group] = true
			}
		}
		s.mu.Unlock()
		if busy {
			continue // in flight, or its group is: the attempt's end looks again
		}
		// Read again now that it is marked in flight: an attempt that was
		// running when the index was read may have ended since (delivered,
		// or rescheduled), and its end must not be sent twice.
		cur, ok, err := s.current(d.ID)
		if err != nil || !ok || cur.NextAt.After(now) {
			if err != nil {
				s.log.Error("webhook: read a pending delivery", "err", err)
			}
			s.done(&d)
			continue
		}
		d = *cur
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			s.done(&d)
			return next
		}
		s.wg.Go(func() {
			s.attempt(ctx, d)
			s.done(&d)
			<-s.slots
			// A pass that ran while this attempt was in flight skipped
			// the delivery; and its next time may be the earliest.
			s.Kick()
		})
	}
	return next
}

func (s *Sender) done(d *Delivery) {
	s.mu.Lock()
	delete(s.inflight, d.ID)
	if d.Group != "" {
		delete(s.groups, d.Group)
	}
	s.mu.Unlock()
}

// attempt sends d once and records the outcome: removed when delivered or
// given up, rescheduled otherwise.
func (s *Sender) attempt(ctx context.Context, d Delivery) {
	if s.cfg.Settled != nil && s.cfg.Settled(d) {
		s.log.Info("webhook: delivered elsewhere; dropped", "delivery", d.ID)
		s.remove(&d)
		return
	}
	status, err := s.post(ctx, &d)
	if ctx.Err() != nil {
		return // shutting down: the delivery stays due and runs at the next start
	}
	d.Attempts++
	d.LastStatus = status
	d.LastError = ""
	if err != nil {
		d.LastError = err.Error()
	} else if status < 200 || status > 299 {
		d.LastError = fmt.Sprintf("the receiver answered HTTP %d", status)
	}
	if d.LastError == "" {
		d.Delivered = true
		s.finish(&d)
		return
	}
	sched := s.cfg.Schedule
	if len(d.Schedule) > 0 {
		sched = d.Schedule
	}
	s.failedAttempts.Add(1)
	if d.Attempts > len(sched) {
		s.gaveUp.Add(1)
		d.GaveUp = true
		s.log.Warn("webhook: given up", "delivery", d.ID, "url", urlpolicy.Redact(d.URL), "attempts", d.Attempts, "last_error", d.LastError)
		s.finish(&d)
		return
	}
	was := d.NextAt
	d.NextAt = s.cfg.Now().Add(sched[d.Attempts-1])
	s.log.Info("webhook: attempt failed; retrying", "delivery", d.ID, "url", urlpolicy.Redact(d.URL), "attempt", d.Attempts, "next_at", d.NextAt, "err", d.LastError)
	b := s.st.NewBatch()
	defer b.Discard()
	err = s.write(b, &d, was)
	if err == nil {
		err = b.Commit(store.Sync)
	}
	if err != nil {
		s.log.Error("webhook: store delivery", "delivery", d.ID, "err", err)
	}
}

func (s *Sender) finish(d *Delivery) {
	s.remove(d)
	if s.cfg.OnFinish != nil {
		s.cfg.OnFinish(*d)
	}
}

// remove deletes a delivery from the store.
func (s *Sender) remove(d *Delivery) {
	b := s.st.NewBatch()
	defer b.Discard()
	b.Delete(s.key(d.ID))
	if s.dueIdx != nil {
		b.Delete(s.dueKey(d.NextAt, d.ID))
	}
	if err := b.Commit(store.Sync); err != nil {
		s.log.Error("webhook: remove delivery", "delivery", d.ID, "err", err)
	}
}

// post makes one attempt and returns the receiver's status.
func (s *Sender) post(ctx context.Context, d *Delivery) (int, error) {
	body := []byte(d.Body)
	if len(body) == 0 {
		body = []byte("{}")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	for k, v := range d.Header {
		req.Header.Set(k, v)
	}
	ts := strconv.FormatInt(s.cfg.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "trawl-webhook/1")
	req.Header.Set("x-svc-delivery", d.ID)
	req.Header.Set("x-svc-timestamp", ts)
	req.Header.Set("x-svc-attempt", strconv.Itoa(d.Attempts+1))
	if d.Event != "" {
		req.Header.Set("x-svc-event", d.Event)
	}
	if d.Monitor != "" {
		req.Header.Set("x-svc-monitor", d.Monitor)
	}
	if d.Secret != "" {
		req.Header.Set("x-svc-signature", Sign(d.Secret, ts, body))
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Sign is the x-svc-signature of body sent at timestamp ts (Unix seconds,
// as sent in x-svc-timestamp) with secret.
func Sign(secret, ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify checks a received delivery's signature in constant time, and
// that its timestamp is within tolerance of now (zero: not checked).
func Verify(secret, ts, signature string, body []byte, now time.Time, tolerance time.Duration) bool {
	if tolerance > 0 {
		sec, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || now.Sub(time.Unix(sec, 0)).Abs() > tolerance {
			return false
		}
	}
	return hmac.Equal([]byte(Sign(secret, ts, body)), []byte(signature))
}

// SignBody is the body signature of a delivery (Delivery.BodySignature):
// "sha256=" and the hex HMAC-SHA256 of body, keyed with secret.
func SignBody(secret string, body []byte) string {
	if len(body) == 0 {
		body = []byte("{}") // what post sends
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// VerifyBody checks a received body signature in constant time.
func VerifyBody(secret, signature string, body []byte) bool {
	return hmac.Equal([]byte(SignBody(secret, body)), []byte(signature))
}

func (s *Sender) key(id string) []byte { return append(append([]byte{}, s.prefix...), id...) }

// dueKey is the index entry of delivery id due at t: the prefix, t in
// Unix nanoseconds big-endian, the id (deliveries due at once in the order
// of their ids).
func (s *Sender) dueKey(t time.Time, id string) []byte {
	k := make([]byte, 0, len(s.dueIdx)+8+len(id))
	k = append(k, s.dueIdx...)
	k = binary.BigEndian.AppendUint64(k, uint64(t.UnixNano()))
	return append(k, id...)
}

// write adds d to b, and to the due index when the sender keeps one; was
// is the time d was due before (zero for a new delivery), whose entry
// goes.
func (s *Sender) write(b *store.Batch, d *Delivery, was time.Time) error {
	raw, err := json.Marshal(d)
	if err != nil {
		return err
	}
	b.Set(s.key(d.ID), raw)
	if s.dueIdx != nil {
		if !was.IsZero() {
			b.Delete(s.dueKey(was, d.ID))
		}
		b.Set(s.dueKey(d.NextAt, d.ID), []byte(d.Group))
	}
	return nil
}

// maxDuePass bounds the deliveries one look reads from the due index; a
// look that reaches it looks again at once (Sender.duePass).
const maxDuePass = 256

// due returns the deliveries to look at now, and the earliest time one
// not among them is due (zero: none known). Without the due index that is
// every pending delivery; with it, those due at now that may go (the
// first of each group whose group has none in flight; at most duePass),
// read by their ids. The index entry's value is the group.
func (s *Sender) due(now time.Time) ([]Delivery, time.Time, error) {
	if s.dueIdx == nil {
		p, err := s.Pending()
		return p, time.Time{}, err
	}
	s.mu.Lock()
	taken := maps.Clone(s.groups)
	s.mu.Unlock()
	var ids []string
	var next time.Time
	err := s.st.Scan(s.dueIdx, nil, func(k, v []byte) (bool, error) {
		rest := k[len(s.dueIdx):]
		if len(rest) < 8 {
			return true, nil
		}
		at := time.Unix(0, int64(binary.BigEndian.Uint64(rest)))
		if at.After(now) {
			next = at
			return false, nil
		}
		if g := string(v); g != "" {
			if taken[g] {
				return true, nil // its group's earlier delivery goes first
			}
			taken[g] = true
		}
		if len(ids) == s.duePass {
			next = now
			return false, nil
		}
		ids = append(ids, string(rest[8:]))
		return true, nil
	})
	if err != nil {
		return nil, time.Time{}, err
	}
	out := make([]Delivery, 0, len(ids))
	for _, id := range ids {
		d, ok, err := s.current(id)
		if err != nil {
			return nil, time.Time{}, err
		}
		if ok { // else finished since the scan
			out = append(out, *d)
		}
	}
	return out, next, nil
}

// current reads delivery id from the store; false when it is gone
// (delivered, or given up).
func (s *Sender) current(id string) (*Delivery, bool, error) {
	raw, err := s.st.Get(s.key(id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	var d Delivery
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, false, err
	}
	return &d, true, nil
}

func newID() string {
	var b [12]byte
	rand.Read(b[:])
	return "wh_" + hex.EncodeToString(b[:])
}
