package jsnode

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// HeartbeatEvery is how often a worker tells JetStream it still works on
// a pulled item: a third of the work consumers' AckWait; CheckHeartbeatEvery
// the same for a monitor check (ConsumerCheck's shorter AckWait).
const (
	HeartbeatEvery      = workAckWait / 3
	CheckHeartbeatEvery = checkAckWait / 3
)

// Next pulls one message of c, waiting at most wait, or until ctx ends
// (a closing cell must not wait out a pull); nats.ErrTimeout when none
// came in time.
func Next(ctx context.Context, c jetstream.Consumer, wait time.Duration) (jetstream.Msg, error) {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	msg, err := c.Next(jetstream.FetchContext(wctx))
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		err = nats.ErrTimeout
	}
	return msg, err
}

// Heartbeat sends msg's InProgress every HeartbeatEvery until the
// returned stop is called or ctx ends, so that a long item (a browser
// page, a crawl task) is not delivered to another cell meanwhile.
func Heartbeat(ctx context.Context, msg jetstream.Msg) (stop func()) {
	return HeartbeatAt(ctx, msg, HeartbeatEvery)
}

// HeartbeatAt is Heartbeat every every.
func HeartbeatAt(ctx context.Context, msg jetstream.Msg, every time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				msg.InProgress()
			}
		}
	}()
	return cancel
}

// Scan calls fn with each message of stream that cfg selects, in order,
// up to the last one there was when it began (an ordered consumer made
// for the read and deleted after it). The consumer is made with Retry's
// attempts: a stream between leaders delays the read, not fails it.
func Scan(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.OrderedConsumerConfig, fn func(jetstream.Msg) error) error {
	var c jetstream.Consumer
	var done func()
	var left uint64
	err := Retry(ctx, func(ctx context.Context) error {
		cc, d, err := Ordered(ctx, js, stream, cfg)
		if err != nil {
			return err
		}
		info, err := cc.Info(ctx)
		if err != nil {
			d()
			return err
		}
		c, done, left = cc, d, info.NumPending
		return nil
	})
	if err != nil {
		return err
	}
	defer done()
	return drain(ctx, c, left, fn)
}

// Ordered makes an ordered consumer of stream for one read (a scan, a
// replay) and returns it with its close, which deletes it: an ordered
// consumer left alone lives on for its inactive threshold (5 minutes by
// default, 30 s here) and a stream holds a bounded number, so a client
// polling a status read from the log would otherwise use them up.
func Ordered(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.OrderedConsumerConfig) (jetstream.Consumer, func(), error) {
	if cfg.InactiveThreshold == 0 {
		cfg.InactiveThreshold = 30 * time.Second
	}
	if cfg.MaxResetAttempts == 0 {
		// Not for ever (the library's default), on a background context
		// that no caller's deadline reaches: a consumer that cannot be
		// made again is an error the caller retries.
		cfg.MaxResetAttempts = 3
	}
	c, err := js.OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		return nil, nil, err
	}
	return c, func() {
		if info := c.CachedInfo(); info != nil {
			dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			js.DeleteConsumer(dctx, stream, info.Name)
			cancel()
		}
	}, nil
}

// drain calls fn with each message an ordered consumer delivers until the
// last one there was when it was made (left of them). It reads through one pull
// subscription (an ordered consumer's Fetch makes a new consumer at every
// call, each a request to the meta leader), and gives up when the log
// sends nothing for 15 s or ctx ends.
func drain(ctx context.Context, c jetstream.Consumer, left uint64, fn func(jetstream.Msg) error) error {
	if left == 0 {
		return nil
	}
	it, err := c.Messages(jetstream.PullMaxMessages(256))
	if err != nil {
		return err
	}
	defer it.Stop()
	for left > 0 {
		nctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		msg, err := it.Next(jetstream.NextContext(nctx))
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("jsnode: the stream stopped answering with %d messages left: %w", left, err)
		}
		if err := fn(msg); err != nil {
			return err
		}
		md, err := msg.Metadata()
		if err != nil {
			return err
		}
		left = md.NumPending
	}
	return nil
}
