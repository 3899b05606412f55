package jsnode

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// HeartbeatEvery is how often a worker tells JetStream it still works on
// a pulled item: a third of the work consumers' AckWait.
const HeartbeatEvery = workAckWait / 3

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
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		t := time.NewTicker(HeartbeatEvery)
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
