package jobs

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/trawlhq/trawl/internal/jobid"
	"github.com/trawlhq/trawl/internal/jsnode"
)

// Answering for a job whose owner is down, from the region's job log
// (mirror.go): any sharing cell reads the job's record and outcomes
// there. The gate sends a job's status and results reads to another
// clustered cell only while the owner is not live (routes.Route
// ReadAnyCell); writes (retry, cancel, release) wait for the owner.
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
		if err != nil || msg.Headers().Get(headerPending) != "" {
			return nil
		}
		var out jobOutcome
		if json.Unmarshal([]byte(msg.Headers().Get(headerOutcome)), &out) == nil {
			outcomes[seq] = &out
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
	ctx, cancel := context.WithTimeout(m.ctx, 2*time.Minute)
	defer cancel()
	mt, owner, err := s.logMeta(ctx, id, account)
	if err != nil {
		return 0, err
	}
	var rank int64
	n := 0
	errEnough := errors.New("enough")
	err = jsnode.Scan(ctx, s.js, jsnode.StreamJobLog, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{jsnode.JobSubject(owner, id) + ".res.*"}, DeliverPolicy: jetstream.DeliverAllPolicy}, func(msg jetstream.Msg) error {
		if msg.Headers().Get(headerPending) != "" {
			return nil
		}
		var out jobOutcome
		if json.Unmarshal([]byte(msg.Headers().Get(headerOutcome)), &out) != nil {
			return nil
		}
		if out.Error != nil && len(mt.Shape) > 0 {
			return nil // a shaped job's failure has no line
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
		if _, err := w.Write(append(line, '\n')); err != nil {
			return err
		}
		if n++; n >= PageLines {
			return errEnough
		}
		return nil
	})
	if errors.Is(err, errEnough) {
		err = nil
	}
	return n, err
}

// logURLs reads a job's submitted URLs from the log.
func logURLs(ctx context.Context, s *sharing, prefix string) ([]string, error) {
	chunks := map[int][]string{}
	err := scanLog(ctx, s.js, prefix+".urls.*", func(msg jetstream.Msg) error {
		n, err := strconv.Atoi(msg.Subject()[strings.LastIndexByte(msg.Subject(), '.')+1:])
		if err != nil {
			return fmt.Errorf("chunk %s: %w", msg.Subject(), err)
		}
		var c []string
		if err := json.Unmarshal(msg.Data(), &c); err != nil {
			return fmt.Errorf("chunk %s: %w", msg.Subject(), err)
		}
		chunks[n] = c
		return nil
	})
	if err != nil {
		return nil, err
	}
	var urls []string
	for n := range len(chunks) {
		c, ok := chunks[n]
		if !ok {
			return nil, fmt.Errorf("chunk %d of %d missing", n, len(chunks))
		}
		urls = append(urls, c...)
	}
	return urls, nil
}
