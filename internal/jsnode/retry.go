package jsnode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A call to a stream whose leader's process just died is not answered:
// the stream's followers wait a few seconds before they elect another
// leader (4 to 9 s in nats-server's Raft), and a request sent meanwhile
// (a publish, a stream's info, a get) waits out the caller's whole
// deadline even after the new leader is in place, while its retry would
// be answered at once. TestCallsAfterLeaderKilled measured a publish
// and an info waiting 40 s for a deadline of 40 s. So calls that a
// caller waits on are tried in attempts of AttemptTimeout until the
// caller's own deadline.

// AttemptTimeout bounds one try of Retry and Publish: longer than any
// answer a stream with a leader gives, shorter than an election.
var AttemptTimeout = 3 * time.Second

// retryPause is the pause after a try the region refused at once (no
// stream answering yet).
const retryPause = 250 * time.Millisecond

// Retry calls fn with a context that ends after AttemptTimeout (or with
// ctx) until fn succeeds, fails with an error that is not the region's
// being between leaders (Unanswered), or ctx ends; it returns fn's last
// error. fn must be safe to repeat.
func Retry(ctx context.Context, fn func(context.Context) error) error {
	for {
		actx, cancel := context.WithTimeout(ctx, AttemptTimeout)
		err := fn(actx)
		cancel()
		if err == nil || ctx.Err() != nil || !Unanswered(err) {
			return err
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			Pause(ctx, retryPause)
		}
	}
}

// errDuplicateInProcess is nats-server's JSStreamDuplicateMessageConflict
// (409, "duplicate message id is in process"): a publish repeated while
// the stream still proposes its first try. Seen when the scheduler's
// repeat of a check's publish met its first try, after a leader change.
const errDuplicateInProcess jetstream.ErrorCode = 10158

// Unanswered reports whether err is a call the region did not answer (a
// stream or the meta group without a leader, or a repeated publish whose
// first try is still in process), which a repeat may find answered.
func Unanswered(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
		return true
	}
	var api *jetstream.APIError
	return errors.As(err, &api) && (api.ErrorCode == jetstream.ErrorCode(nats.JSErrCodeJetStreamNotAvailable) ||
		api.ErrorCode == errDuplicateInProcess)
}

// Publish is js.PublishMsg tried as Retry tries. A msg without a message
// id is given one, so that a try that was stored but whose answer was
// lost is not stored again by the next (the stream's duplicate window
// answers it with the first try's sequence); an expected last sequence
// is checked after that, so a repeat of a stored conditional write
// succeeds too.
func Publish(ctx context.Context, js jetstream.JetStream, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if msg.Header == nil {
		msg.Header = nats.Header{}
	}
	if msg.Header.Get(jetstream.MsgIDHeader) == "" {
		var id [12]byte
		rand.Read(id[:])
		msg.Header.Set(jetstream.MsgIDHeader, hex.EncodeToString(id[:]))
	}
	var ack *jetstream.PubAck
	err := Retry(ctx, func(ctx context.Context) error {
		a, err := js.PublishMsg(ctx, msg, opts...)
		ack = a
		return err
	})
	return ack, err
}

// PublishData is Publish of data on subject.
func PublishData(ctx context.Context, js jetstream.JetStream, subject string, data []byte, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	return Publish(ctx, js, &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}, opts...)
}

// LastMsg is the last message on subject of stream, read with Retry's
// attempts; jetstream.ErrMsgNotFound when it has none.
func LastMsg(ctx context.Context, js jetstream.JetStream, stream, subject string) (*jetstream.RawStreamMsg, error) {
	var msg *jetstream.RawStreamMsg
	err := Retry(ctx, func(ctx context.Context) error {
		st, err := js.Stream(ctx, stream)
		if err == nil {
			msg, err = st.GetLastMsgForSubject(ctx, subject)
		}
		return err
	})
	return msg, err
}

// LastMsgOf is LastMsg of a stream's handle.
func LastMsgOf(ctx context.Context, st jetstream.Stream, subject string) (*jetstream.RawStreamMsg, error) {
	var msg *jetstream.RawStreamMsg
	err := Retry(ctx, func(ctx context.Context) error {
		m, err := st.GetLastMsgForSubject(ctx, subject)
		msg = m
		return err
	})
	return msg, err
}
