package jobs

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/trawlhq/trawl/internal/jobid"
	"github.com/trawlhq/trawl/internal/jsnode"
)

// Answering for a job whose owner is down, from the region's job log
// (mirror.go): any sharing cell reads the job's record and outcomes
// there, and takes a cancel for it (logCancel). The gate sends those
// calls to another clustered cell only while the owner is not live
// (routes.Route AnyCell); the other writes (retry, release) wait for
// the owner.
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
	if !ok || owner == m.cfg.Cell {
		return nil, false
	}
	s := m.share.Load()
	return s, s != nil || m.cfg.AwaitShare > 0
}

// logMeta reads job id's record from the log and checks its account.
func (s *sharing) logMeta(ctx context.Context, id, account string) (meta, string, error) {
	var mt meta
	_, owner, _ := jobid.Parse(id)
	st, err := s.js.Stream(ctx, jsnode.StreamJobLog)
	if err != nil {
		return mt, owner, err
	}
	msg, err := st.GetLastMsgForSubject(ctx, jsnode.JobSubject(owner, id)+".meta")
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return mt, owner, ErrNoJob
	}
	if err != nil {
		return mt, owner, err
	}
	if err := json.Unmarshal(msg.Data, &mt); err != nil {
		return mt, owner, fmt.Errorf("job %s: record: %w", id, err)
	}
	if account == "" || subtle.ConstantTimeCompare([]byte(mt.Account), []byte(account)) != 1 {
		return mt, owner, ErrNoJob
	}
	return mt, owner, nil
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
	outcomes := map[uint64]*jobOutcome{}
	if err := jsnode.Scan(ctx, s.js, jsnode.StreamJobLog, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{prefix + ".res.*"}, DeliverPolicy: jetstream.DeliverAllPolicy, HeadersOnly: true}, func(msg jetstream.Msg) error {
		seq, err := strconv.ParseUint(msg.Subject()[strings.LastIndexByte(msg.Subject(), '.')+1:], 10, 64)
		if err != nil {
			return nil
		}
		if out, ok := outcomeOf(msg); ok {
			outcomes[seq] = &out
		} else {
			delete(outcomes, seq)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	st := &Status{JobID: id, Total: mt.Total, CreatedAt: mt.CreatedAt, Options: mt.Options, Shape: mt.Shape,
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
	st.Pending = max(mt.Total-st.Done-st.Error, 0)
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
			b, err := s.blobs.GetBytes(ctx, out.Blob)
			if err != nil {
				return fmt.Errorf("blob %s: %w", out.Blob, err)
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
	if h.Get(headerPending) != "" || h.Get(headerCancel) != "" {
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

// headerCancel marks a .res.cancel message of the log: a cancel of the
// job taken by another cell while its owner was down (logCancel). Its
// value is the cancel (cancelRequest, JSON). The owner's results
// consumer applies it: at once if the owner is live after all, or when
// it is back.
const headerCancel = "Trawl-Cancel"

type cancelRequest struct {
	Job     string    `json:"job"`
	Account string    `json:"account"`
	At      time.Time `json:"at"`
	Cell    string    `json:"cell"` // who took it
}

// logCancel is Cancel of a job this cell does not own, whose owner is
// down: the cancel goes to the owner as a request in its results (stored
// on a quorum before the answer), then the job's record in the log says
// cancelled, so the region's reads and its coordinator (adopt.go, which
// stops feeding the job) see it now. The record is written only over
// the one read (a change of the owner's meanwhile wins: the owner
// applies the request anyway). URLs already queued are fetched and keep
// their results, as a cancel's in-flight URLs do.
func (m *Manager) logCancel(s *sharing, id, account string) error {
	ctx, cancel := context.WithTimeout(m.ctx, 30*time.Second)
	defer cancel()
	_, owner, _ := jobid.Parse(id)
	stream, err := s.js.Stream(ctx, jsnode.StreamJobLog)
	if err != nil {
		return err
	}
	rec, err := stream.GetLastMsgForSubject(ctx, jsnode.JobSubject(owner, id)+".meta")
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return ErrNoJob
	}
	if err != nil {
		return err
	}
	var mt meta
	if err := json.Unmarshal(rec.Data, &mt); err != nil {
		return fmt.Errorf("job %s: record: %w", id, err)
	}
	if account == "" || subtle.ConstantTimeCompare([]byte(mt.Account), []byte(account)) != 1 {
		return ErrNoJob
	}
	if !mt.CancelledAt.IsZero() {
		return nil // cancelling again changes nothing
	}
	now := m.cfg.Now().UTC()
	req, _ := json.Marshal(cancelRequest{Job: id, Account: account, At: now, Cell: m.cfg.Cell})
	msg := nats.NewMsg(jsnode.JobSubject(owner, id) + ".res.cancel")
	msg.Header.Set(headerCancel, string(req))
	if _, err := s.js.PublishMsg(ctx, msg, jetstream.WithMsgID(id+"/cancel")); err != nil {
		return err
	}
	mt.CancelledAt = now
	b, _ := json.Marshal(mt)
	if _, err := s.js.Publish(ctx, rec.Subject, b, jetstream.WithExpectLastSequencePerSubject(rec.Sequence)); err != nil {
		m.cfg.Logger.Warn("jobs: a cancel's record not written to the log (its owner applies the cancel when it is back)", "job", id, "err", err)
	}
	m.cfg.Logger.Info("jobs: cancelled the job of a cell that is down", "job", id, "owner", owner)
	return nil
}

// applyCancelRequest applies a cancel another cell took for one of this
// cell's jobs while it was down (logCancel).
func (m *Manager) applyCancelRequest(raw string) error {
	var req cancelRequest
	if err := json.Unmarshal([]byte(raw), &req); err != nil || req.Job == "" {
		m.cfg.Logger.Error("jobs: unreadable cancel request dropped", "err", err)
		return nil
	}
	m.mu.Lock()
	j := m.jobs[req.Job]
	m.mu.Unlock()
	if j == nil || subtle.ConstantTimeCompare([]byte(j.account()), []byte(req.Account)) != 1 {
		return nil // swept, or not the account's: nothing to cancel
	}
	m.cfg.Logger.Info("jobs: job cancelled by another cell while this one was down", "job", req.Job, "by", req.Cell)
	return m.cancelJob(j)
}
