package jobs

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/jobid"
	"github.com/trawlhq/trawl/internal/jsnode"
)

// Answering for a job whose owner is down, from the region's job log
// (mirror.go): any sharing cell reads the job's record and outcomes
// there, and takes a cancel for it (logCancel). The gate sends those
// calls to another clustered cell only while the owner is not live
// (routes.Route AnyCell), including a retry (logRetry), and sends a
// held job's or retry's release to another cell while its owner is down
// (logRelease).
//
// The answer is the log's: counts from the outcomes it holds (an URL the
// owner recorded is in the log before its outcome is acked), the
// results in the order the outcomes reached the log. That order is not
// the owner's slot order, so an ?after= cursor from one is not valid on
// the other: a client that switches reads the results again from 0.

// foreign reports whether this cell answers job id from the log: the
// job is another cell's and this cell shares (or will: AwaitShare). The
// sharing is nil until sharing starts.
func (m *Manager) foreign(id string) (*sharing, bool) {
	_, owner, ok := jobid.Parse(id)
	if !ok || owner == m.cfg.Cell || owner == "" && m.Exists(id) {
		return nil, false
	}
	s := m.share.Load()
	return s, s != nil || m.cfg.AwaitShare > 0
}

// owner is the cell that owns job id: the one its id names, or for a
// region's id (jobid.NewPlaced) this cell if it has the job, else the
// one whose subjects hold its record in the log (remembered: a job
// never changes owner). ErrNoJob when none does.
func (s *sharing) owner(ctx context.Context, id string) (string, error) {
	_, owner, ok := jobid.Parse(id)
	if !ok {
		return "", ErrNoJob
	}
	if owner != "" {
		return owner, nil
	}
	s.viewsMu.Lock()
	o, ok := s.owners[id]
	s.viewsMu.Unlock()
	if ok {
		return o, nil
	}
	msg, err := jsnode.LastMsg(ctx, s.js, jsnode.StreamJobLog, jsnode.JobSubject("*", id)+".meta")
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return "", ErrNoJob
	}
	if err != nil {
		return "", err
	}
	owner = ownerOfSubject(msg.Subject)
	s.viewsMu.Lock()
	if s.owners == nil || len(s.owners) >= maxOwners {
		s.owners = map[string]string{} // bounded: found again when asked
	}
	s.owners[id] = owner
	s.viewsMu.Unlock()
	return owner, nil
}

// logMeta reads job id's record from the log and checks its account.
func (s *sharing) logMeta(ctx context.Context, id, account string) (meta, string, error) {
	mt, rec, err := s.logRecord(ctx, id, account)
	if err != nil {
		return mt, "", err
	}
	return mt, ownerOfSubject(rec.Subject), nil
}

// ownerOfSubject is the owner a job log subject names
// (trawl.job.<owner>.<job>...).
func ownerOfSubject(subject string) string { return jsnode.SubjectOwner(jsnode.SubjectJobLog, subject) }

// logRecord is logMeta with the record's message (its subject and
// sequence, for a write over it).
func (s *sharing) logRecord(ctx context.Context, id, account string) (meta, *jetstream.RawStreamMsg, error) {
	var mt meta
	owner, err := s.owner(ctx, id)
	if err != nil {
		return mt, nil, err
	}
	msg, err := jsnode.LastMsg(ctx, s.js, jsnode.StreamJobLog, jsnode.JobSubject(owner, id)+".meta")
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return mt, nil, ErrNoJob
	}
	if err != nil {
		return mt, nil, err
	}
	if err := json.Unmarshal(msg.Data, &mt); err != nil {
		return mt, nil, fmt.Errorf("job %s: record: %w", id, err)
	}
	if account == "" || subtle.ConstantTimeCompare([]byte(mt.Account), []byte(account)) != 1 {
		return mt, nil, ErrNoJob
	}
	return mt, msg, nil
}

// logView is what this cell read of the outcomes of a job it does not
// own, kept to read on from there at the next call: a client polling a
// job on a cell that is not its owner reads each outcome once, not all
// of them at every call (BenchmarkStatusFromLog: 21 ms a call for 2,000
// outcomes read whole).
type logView struct {
	mu       sync.Mutex
	outcomes map[uint64]*jobOutcome // by the URL's seq
	next     uint64                 // the stream sequence to read on from
	// A growing job's: the end of the URLs its pages added (the seq
	// after the last), and where to read its growth on from.
	grownEnd, growNext uint64
	used               time.Time
}

// maxLogViews bounds the jobs whose logView a cell keeps (the least
// recently used goes); maxOwners the owners of region ids it remembers.
const (
	maxLogViews = 64
	maxOwners   = 10000
)

// view is job id's logView, made on first use.
func (s *sharing) view(id string) *logView {
	s.viewsMu.Lock()
	defer s.viewsMu.Unlock()
	if s.views == nil {
		s.views = map[string]*logView{}
	}
	v := s.views[id]
	if v == nil {
		if len(s.views) >= maxLogViews {
			var oldest string
			for k, o := range s.views {
				if oldest == "" || o.used.Before(s.views[oldest].used) {
					oldest = k
				}
			}
			delete(s.views, oldest)
		}
		v = &logView{outcomes: map[uint64]*jobOutcome{}}
		s.views[id] = v
	}
	v.used = time.Now()
	return v
}

// readOn reads the outcomes published on prefix's results since the
// last read (a later message of a URL's subject replaces its earlier
// one; one that is not an outcome makes the URL pending again).
func (v *logView) readOn(ctx context.Context, js jetstream.JetStream, prefix string) error {
	return readOnFrom(ctx, js, prefix+".res.*", true, &v.next, func(seq uint64, msg jetstream.Msg) {
		if out, ok := outcomeOf(msg); ok {
			v.outcomes[seq] = &out
		} else {
			delete(v.outcomes, seq)
		}
	})
}

// readGrowth reads on the chunks of URLs a growing job's pages added
// (.grow.<first seq>), for the job's total.
func (v *logView) readGrowth(ctx context.Context, js jetstream.JetStream, prefix string) error {
	return readOnFrom(ctx, js, prefix+".grow.*", false, &v.growNext, func(first uint64, msg jetstream.Msg) {
		var chunk []grownURL
		if json.Unmarshal(msg.Data(), &chunk) == nil {
			v.grownEnd = max(v.grownEnd, first+uint64(len(chunk)))
		}
	})
}

// readOnFrom scans the job log's messages on filter from stream
// sequence *next on (all of them the first time), moving *next past
// each, and calls fn with the number that ends each one's subject (a
// URL's seq, a chunk's first); a subject without one is skipped.
func readOnFrom(ctx context.Context, js jetstream.JetStream, filter string, headersOnly bool, next *uint64, fn func(n uint64, msg jetstream.Msg)) error {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverAllPolicy, HeadersOnly: headersOnly}
	if *next > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, *next
	}
	return jsnode.Scan(ctx, js, jsnode.StreamJobLog, cfg, func(msg jetstream.Msg) error {
		if md, err := msg.Metadata(); err == nil {
			*next = md.Sequence.Stream + 1
		}
		if n, err := strconv.ParseUint(msg.Subject()[strings.LastIndexByte(msg.Subject(), '.')+1:], 10, 64); err == nil {
			fn(n, msg)
		}
		return nil
	})
}

// logStatus is Status of a job this cell does not own, from the log.
func (m *Manager) logStatus(s *sharing, id, account string, full bool) (*Status, error) {
	ctx, cancel := context.WithTimeout(m.ctx, 30*time.Second)
	defer cancel()
	mt, owner, err := s.logMeta(ctx, id, account)
	if err != nil {
		return nil, err
	}
	prefix := jsnode.JobSubject(owner, id)
	v := s.view(id)
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.readOn(ctx, s.js, prefix); err != nil {
		return nil, err
	}
	total := mt.Total
	if mt.Grow != nil {
		if err := v.readGrowth(ctx, s.js, prefix); err != nil {
			return nil, err
		}
		total = max(total, int(v.grownEnd))
	}
	outcomes := v.outcomes
	st := &Status{JobID: id, Total: total, CreatedAt: mt.CreatedAt, Options: mt.Options, Shape: mt.Shape,
		Charged: mt.RetryUnits, ExpiresAt: mt.CreatedAt.Add(m.cfg.Retention), Held: mt.Hold != "",
		CreditsMC: mt.CreditsMC, CreditsKnown: !mt.Uncounted}
	if mt.Hold == "" {
		st.Charged += mt.Units
	}
	for _, o := range outcomes {
		if o.Error != nil {
			st.Error++
		} else {
			st.Done++
		}
	}
	st.Pending = max(total-st.Done-st.Error, 0)
	cancelled := !mt.CancelledAt.IsZero()
	if cancelled {
		st.Cancelled, st.Pending = st.Pending, 0
	}
	st.Status, st.Failure = statusOf(&mt, st.Pending, st.Done+st.Error > 0), mt.Failure
	if full {
		urls, err := logURLs(ctx, s, prefix)
		if err != nil {
			return nil, err
		}
		if mt.Grow != nil {
			grown, err := logGrowth(ctx, s, prefix, uint64(len(urls)))
			if err != nil {
				return nil, err
			}
			for _, g := range grown {
				urls = append(urls, g.URL)
			}
		}
		st.URLs = make([]URLStatus, 0, len(urls))
		for i, u := range urls {
			us := URLStatus{URL: u, State: urlPending}
			if o := outcomes[uint64(i)]; o != nil {
				us.State, us.Attempts = urlDone, o.Attempts
				if o.Error != nil {
					us.State, us.Error, us.Message = urlError, o.Error.Code, o.Error.Message
				}
			} else if cancelled {
				us.State = urlCancelled
			}
			st.URLs = append(st.URLs, us)
		}
	}
	return st, nil
}

// logResults is Results of a job this cell does not own: the lines of
// the outcomes in the log's order, from the after-th, at most PageLines.
func (m *Manager) logResults(s *sharing, id, account string, after int64, w io.Writer) (int, error) {
	n := 0
	var werr error
	err := m.logScanResults(s, id, account, after, func(line []byte) bool {
		if _, werr = w.Write(append(line, '\n')); werr != nil {
			return false
		}
		n++
		return n < PageLines
	})
	if err == nil {
		err = werr
	}
	return n, err
}

// logScanResults is ScanResults of a job this cell does not own: fn is
// called with the lines of its outcomes in the log's order, from the
// after-th on, until it returns false.
func (m *Manager) logScanResults(s *sharing, id, account string, after int64, fn func(line []byte) bool) error {
	ctx, cancel := context.WithTimeout(m.ctx, 2*time.Minute)
	defer cancel()
	mt, owner, err := s.logMeta(ctx, id, account)
	if err != nil {
		return err
	}
	var rank int64
	errEnough := errors.New("enough")
	err = jsnode.Scan(ctx, s.js, jsnode.StreamJobLog, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{jsnode.JobSubject(owner, id) + ".res.*"}, DeliverPolicy: jetstream.DeliverAllPolicy}, func(msg jetstream.Msg) error {
		out, ok := outcomeOf(msg)
		if !ok || (out.Error != nil && len(mt.Shape) > 0) {
			return nil // a mark, or a shaped job's failure: no line
		}
		rank++
		if rank <= after {
			return nil
		}
		line := msg.Data()
		if out.Blob != "" {
			b, err := jsnode.Unload(ctx, s.blobs, out.Blob)
			if err != nil {
				return err
			}
			line = b
		}
		if !fn(line) {
			return errEnough
		}
		return nil
	})
	if errors.Is(err, errEnough) {
		err = nil
	}
	return err
}

// logFailures is Failures of a job this cell does not own, from the
// outcomes in the log.
func (m *Manager) logFailures(s *sharing, id, account string) ([]Failure, error) {
	ctx, cancel := context.WithTimeout(m.ctx, 2*time.Minute)
	defer cancel()
	_, owner, err := s.logMeta(ctx, id, account)
	if err != nil {
		return nil, err
	}
	failed := map[uint64]Failure{}
	err = jsnode.Scan(ctx, s.js, jsnode.StreamJobLog, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{jsnode.JobSubject(owner, id) + ".res.*"}, DeliverPolicy: jetstream.DeliverAllPolicy, HeadersOnly: true}, func(msg jetstream.Msg) error {
		seq, err := strconv.ParseUint(msg.Subject()[strings.LastIndexByte(msg.Subject(), '.')+1:], 10, 64)
		if err != nil {
			return nil
		}
		out, ok := outcomeOf(msg)
		if !ok || out.Error == nil {
			delete(failed, seq) // put back to pending, or done
			return nil
		}
		f := Failure{Index: int(seq), URL: out.URL, Error: out.Error.Code, Message: out.Error.Message, Status: out.Error.Status}
		if md, err := msg.Metadata(); err == nil {
			f.At = md.Timestamp.UTC()
		}
		failed[seq] = f
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]Failure, 0, len(failed))
	for _, f := range failed {
		out = append(out, f)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Index < out[b].Index })
	return out, nil
}

// outcomeOf reads the outcome a .res.<seq> message of the log carries;
// false for a mark (a URL put back to pending, a cancel request) or an
// unreadable header.
func outcomeOf(msg jetstream.Msg) (jobOutcome, bool) {
	var out jobOutcome
	h := msg.Headers()
	if h.Get(headerPending) != "" || h.Get(headerCancel) != "" || h.Get(headerRelease) != "" || h.Get(headerRetry) != "" {
		return out, false
	}
	return out, json.Unmarshal([]byte(h.Get(headerOutcome)), &out) == nil
}

// logURLs reads a job's submitted URLs from the log.
func logURLs(ctx context.Context, s *sharing, prefix string) ([]string, error) {
	chunks, err := logChunks[string](ctx, s, prefix+".urls.*")
	if err != nil {
		return nil, err
	}
	var urls []string
	for n := range uint64(len(chunks)) {
		c, ok := chunks[n]
		if !ok {
			return nil, fmt.Errorf("chunk %d of %d missing", n, len(chunks))
		}
		urls = append(urls, c...)
	}
	return urls, nil
}

// logChunks reads the chunks of a job's list on subject filter (its
// submitted URLs, a crawl's growth), by the number that ends each
// subject: the chunk's place, or the seq of its first item.
func logChunks[T any](ctx context.Context, s *sharing, filter string) (map[uint64][]T, error) {
	chunks := map[uint64][]T{}
	err := scanLog(ctx, s.js, filter, func(msg jetstream.Msg) error {
		n, err := strconv.ParseUint(msg.Subject()[strings.LastIndexByte(msg.Subject(), '.')+1:], 10, 64)
		if err != nil {
			return fmt.Errorf("chunk %s: %w", msg.Subject(), err)
		}
		var c []T
		if err := json.Unmarshal(msg.Data(), &c); err != nil {
			return fmt.Errorf("chunk %s: %w", msg.Subject(), err)
		}
		chunks[n] = c
		return nil
	})
	return chunks, err
}

// Requests to a job's owner, taken by another cell while it was down:
// a .res.cancel or .res.release message of the log whose header carries
// the request (JSON). The owner's results consumer applies it: at once
// if the owner is live after all, or when it is back.
const (
	headerCancel  = "Trawl-Cancel"  // cancelRequest (logCancel)
	headerRelease = "Trawl-Release" // releaseRequest (logRelease)
	headerRetry   = "Trawl-Retry"   // retryRequest (logRetry; logRelease of its token)
	headerDrop    = "Trawl-Drop"    // releaseRequest of a hold the gate could not charge (logDrop)
)

type cancelRequest struct {
	Job     string    `json:"job"`
	Account string    `json:"account"`
	At      time.Time `json:"at"`
	Cell    string    `json:"cell"` // who took it
}

// releaseRequest is a release of a held job's hold, charged CreditsMC
// (-1: the gate did not say).
type releaseRequest struct {
	cancelRequest
	Token     string `json:"token"`
	CreditsMC int64  `json:"credits_mc"`
}

// retryRequest is a retry of a job's failed URLs Seqs, held under Token
// until Until (logRetry), or with Released its release, charged
// CreditsMC (logRelease).
type retryRequest struct {
	releaseRequest
	Until    time.Time `json:"until,omitzero"`
	Seqs     []uint64  `json:"seqs"`
	Released bool      `json:"released,omitempty"`
}

// retryKind names a retry's hold request, and with released its
// release, on the owner's results subject (.res.<kind>).
func retryKind(token string, released bool) string {
	if released {
		return "retryrel-" + token
	}
	return "retry-" + token
}

// logCancel is Cancel of a job this cell does not own, whose owner is
// down: the cancel goes to the owner as a request in its results (stored
// on a quorum before the answer), then the job's record in the log says
// cancelled, so the region's reads and its coordinator (adopt.go, which
// stops feeding the job) see it now. URLs already queued are fetched and
// keep their results, as a cancel's in-flight URLs do.
func (m *Manager) logCancel(s *sharing, id, account string) error {
	now := m.cfg.Now().UTC()
	req := cancelRequest{Job: id, Account: account, At: now, Cell: m.cfg.Cell}
	return m.logRequest(s, id, account, "cancel", headerCancel, req, func(mt *meta) (bool, error) {
		if !mt.CancelledAt.IsZero() {
			return false, nil // cancelling again changes nothing
		}
		mt.CancelledAt = now
		return true, nil
	})
}

// logDrop is Drop of a held job this cell does not own: a request to the
// owner, then the record without the hold (a held job's hold expired
// now, a held retry's undone), so the region's reads and the
// coordinator see it at once. A token that holds nothing changes
// nothing, as on the owner.
func (m *Manager) logDrop(s *sharing, id, account, token string) error {
	if token == "" {
		return nil
	}
	req := releaseRequest{cancelRequest: cancelRequest{Job: id, Account: account, At: m.cfg.Now().UTC(), Cell: m.cfg.Cell}, Token: token, CreditsMC: -1}
	return m.logRequest(s, id, account, "drop-"+token, headerDrop, req, func(mt *meta) (bool, error) {
		switch token {
		case mt.Hold:
			if mt.HeldUntil.IsZero() {
				return false, nil // dropped before
			}
			mt.HeldUntil = time.Time{}
		case mt.RetryHold:
			mt.RetryHold, mt.RetryUntil = "", time.Time{}
		default:
			return false, nil
		}
		return true, nil
	})
}

// logRelease is ReleaseCharged of a held job this cell does not own,
// whose owner is down (the gate charged the hold and must not wait for
// the owner for longer than the hold lasts): as logCancel, a request to
// the owner, then the record released, so the coordinator feeds the job
// now (adopt.go) and the region's reads see it started. A held retry's
// token is released by logReleaseRetry.
func (m *Manager) logRelease(s *sharing, id, account, token string, creditsMC int64) error {
	if token == "" {
		return ErrNoHold
	}
	now := m.cfg.Now().UTC()
	req := releaseRequest{cancelRequest: cancelRequest{Job: id, Account: account, At: now, Cell: m.cfg.Cell}, Token: token, CreditsMC: creditsMC}
	err := m.logRequest(s, id, account, "release", headerRelease, req, func(mt *meta) (bool, error) {
		switch {
		case token == mt.Released || token == mt.RetryReleased:
			return false, nil
		case token == mt.RetryHold:
			return false, errRetryToken
		case token == mt.Hold:
			if now.After(mt.HeldUntil) {
				return false, ErrNoHold
			}
			mt.Hold, mt.HeldUntil, mt.Released = "", time.Time{}, token
			mt.addCredits(creditsMC)
			return true, nil
		}
		return false, ErrNoHold
	})
	if err == errRetryToken {
		return m.logReleaseRetry(s, id, account, token, creditsMC)
	}
	return err
}

// errRetryToken: the token released is a held retry's (logReleaseRetry).
var errRetryToken = errors.New("jobs: a retry's token")

// logRetry is HoldRetry of a job this cell does not own, whose owner is
// down: the job's failed URLs that are fetchable (from the log's
// outcomes) are held under a new token, told to the owner as a request
// in its results (which it applies as its own HoldRetry would have), and
// the record in the log says so; the gate's release of the token then
// comes here too (logReleaseRetry).
func (m *Manager) logRetry(s *sharing, id, account string, fetchable func(string) bool) (int, string, error) {
	failed, err := m.logFailures(s, id, account)
	if err != nil {
		return 0, "", err
	}
	var seqs []uint64
	for _, f := range failed {
		if fetchable(f.URL) {
			seqs = append(seqs, uint64(f.Index))
		}
	}
	if len(seqs) == 0 {
		return 0, "", nil
	}
	now := m.cfg.Now().UTC()
	token := newToken()
	req := retryRequest{releaseRequest: releaseRequest{cancelRequest: cancelRequest{Job: id, Account: account, At: now, Cell: m.cfg.Cell},
		Token: token}, Until: now.Add(m.cfg.HoldTTL), Seqs: seqs}
	held := false
	err = m.logRequest(s, id, account, retryKind(token, false), headerRetry, req, func(mt *meta) (bool, error) {
		if mt.Hold != "" || !mt.CancelledAt.IsZero() {
			return false, nil
		}
		if mt.RetryHold != "" && !now.After(mt.RetryUntil) {
			return false, ErrRetryHeld
		}
		mt.RetryHold, mt.RetryUntil = token, req.Until
		held = true
		return true, nil
	})
	if err != nil || !held {
		return 0, "", err
	}
	return len(seqs), token, nil
}

// logReleaseRetry is logRelease of a retry this cell held for a down
// owner (logRetry: its request names the URLs): the release goes to the
// owner as a request, the record says released and charged, and the
// retried URLs are marked pending in the log, so the coordinator feeds
// them and reads count them pending. A retry the owner held itself is
// in the log the same way (HoldRetry); one held before that was written
// waits for the owner (ErrOwnerDown).
func (m *Manager) logReleaseRetry(s *sharing, id, account, token string, creditsMC int64) error {
	ctx, cancel := context.WithTimeout(m.ctx, 30*time.Second)
	defer cancel()
	owner, err := s.owner(ctx, id)
	if err != nil {
		return err
	}
	msg, err := jsnode.LastMsg(ctx, s.js, jsnode.StreamJobLog, jsnode.JobSubject(owner, id)+".res."+retryKind(token, false))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return ErrOwnerDown
	}
	if err != nil {
		return err
	}
	var req retryRequest
	if err := json.Unmarshal([]byte(msg.Header.Get(headerRetry)), &req); err != nil || req.Token != token {
		return fmt.Errorf("job %s: retry request: %v", id, err)
	}
	now := m.cfg.Now().UTC()
	req.Released, req.CreditsMC, req.At, req.Cell = true, creditsMC, now, m.cfg.Cell
	released, cancelled := false, false
	err = m.logRequest(s, id, account, retryKind(token, true), headerRetry, req, func(mt *meta) (bool, error) {
		cancelled = !mt.CancelledAt.IsZero()
		switch {
		case token == mt.RetryReleased:
			return false, nil
		case token != mt.RetryHold || now.After(mt.RetryUntil):
			return false, ErrNoHold
		}
		mt.RetryHold, mt.RetryUntil, mt.RetryReleased = "", time.Time{}, token
		mt.RetryUnits += len(req.Seqs)
		mt.addCredits(creditsMC)
		released = true
		return true, nil
	})
	if err != nil || !released {
		return err
	}
	if !cancelled { // else its held URLs are cancelled with it (by the owner)
		s.markPending(owner, id, req.Seqs, m.cfg.Logger)
	}
	return nil
}

// ErrLogUnavailable answers a call about a down owner's job that the
// region's log did not answer (its streams electing new leaders just
// after a cell died, or without a quorum): the caller repeats it.
var ErrLogUnavailable = &httpjson.HTTPError{Status: http.StatusServiceUnavailable, Code: "try_again", RetryAfter: 2 * time.Second,
	Message: "the region's job log did not answer for this job just now; repeat the request in a few seconds"}

// fromLog is err of a call about job id that another cell's log answers
// for: the jobs package's own answers as they are, any other failure
// (the log's) ErrLogUnavailable rather than a 500.
func (m *Manager) fromLog(op, id string, err error) error {
	if err == nil || errors.Is(err, ErrNoJob) || errors.Is(err, ErrNoHold) || errors.Is(err, ErrRetryHeld) {
		return err
	}
	if _, ok := errors.AsType[*httpjson.HTTPError](err); ok {
		return err
	}
	m.cfg.Logger.Warn("jobs: the region's log did not answer for a down cell's job", "op", op, "job", id, "err", err)
	return ErrLogUnavailable
}

// ErrOwnerDown answers a write that waits for the job's owner, which is
// down.
var ErrOwnerDown = &httpjson.HTTPError{Status: http.StatusServiceUnavailable, Code: "cell_unavailable", RetryAfter: 5 * time.Second,
	Message: "the cell holding this job is not reachable right now; the job is kept, repeat the request in a few seconds"}

// logRequest takes a write for job id of account while its owner is
// down: it reads the job's record in the log (another account's job is
// ErrNoJob), lets change check and alter it (false: nothing to do),
// sends req to the owner on its results subject .res.<kind> with
// header (stored on a quorum before the answer), then writes the
// changed record only over the one read (a change of the owner's
// meanwhile wins: the owner applies the request anyway).
func (m *Manager) logRequest(s *sharing, id, account, kind, header string, req any, change func(*meta) (bool, error)) error {
	ctx, cancel := context.WithTimeout(m.ctx, 30*time.Second)
	defer cancel()
	mt, rec, err := s.logRecord(ctx, id, account)
	if err != nil {
		return err
	}
	owner := ownerOfSubject(rec.Subject)
	if ok, err := change(&mt); !ok || err != nil {
		return err
	}
	if err := s.putRequest(ctx, owner, id, kind, header, req); err != nil {
		return err
	}
	b, _ := json.Marshal(mt)
	if _, err := jsnode.PublishData(ctx, s.js, rec.Subject, b, jetstream.WithExpectLastSequencePerSubject(rec.Sequence)); err != nil {
		m.cfg.Logger.Warn("jobs: a record changed for a cell that is down not written to the log (it applies the request when it is back)",
			"job", id, "request", kind, "err", err)
	}
	m.cfg.Logger.Info("jobs: took a request for a job another cell owns (its owner applies it from the log)", "job", id, "owner", owner, "request", kind)
	return nil
}

// putRequest publishes req for owner's job id on its results subject
// .res.<kind>, with header, stored on a quorum.
func (s *sharing) putRequest(ctx context.Context, owner, id, kind, header string, req any) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	body, _ := json.Marshal(req)
	msg := nats.NewMsg(jsnode.JobSubject(owner, id) + ".res." + kind)
	msg.Header.Set(header, string(body))
	_, err := jsnode.Publish(ctx, s.js, msg, jetstream.WithMsgID(id+"/"+kind))
	return err
}

// applyRequest applies a request another cell took for one of this
// cell's jobs while it was down (logRequest); false when h is not one.
// A release is judged at the time it was taken, as the gate's release
// would have been; a retry's URLs are marked pending in the log by the
// cell that took its release.
func (m *Manager) applyRequest(h nats.Header) (bool, error) {
	kind, raw := "cancel", h.Get(headerCancel)
	if raw == "" {
		kind, raw = "release", h.Get(headerRelease)
	}
	if raw == "" {
		kind, raw = "retry", h.Get(headerRetry)
	}
	if raw == "" {
		kind, raw = "drop", h.Get(headerDrop)
	}
	if raw == "" {
		return false, nil
	}
	var req retryRequest // a cancel's and a release's fields are its first ones
	if err := json.Unmarshal([]byte(raw), &req); err != nil || req.Job == "" {
		m.cfg.Logger.Error("jobs: unreadable request dropped", "request", kind, "err", err)
		return true, nil
	}
	m.mu.Lock()
	j := m.jobs[req.Job]
	m.mu.Unlock()
	if j == nil || subtle.ConstantTimeCompare([]byte(j.account()), []byte(req.Account)) != 1 {
		return true, nil // swept, or not the account's: nothing to do
	}
	m.cfg.Logger.Info("jobs: a request another cell took while this one was down", "request", kind, "job", req.Job, "by", req.Cell)
	switch {
	case kind == "cancel":
		return true, m.cancelJob(j)
	case kind == "drop":
		return true, m.dropJob(j, req.Token)
	case kind == "retry" && !req.Released:
		return true, m.holdRetryFor(j, req)
	}
	err := m.releaseJob(j, req.Token, req.CreditsMC, req.At, true)
	if errors.Is(err, ErrNoHold) {
		m.cfg.Logger.Warn("jobs: a release taken while this cell was down matches no hold", "job", req.Job)
		return true, nil
	}
	return true, err
}
