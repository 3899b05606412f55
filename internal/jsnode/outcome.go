package jsnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Outcomes (a crawl task's, a background recipe run's) travel from the
// cell that ran the work to its owner on the job log, and the owner's
// durable consumer collects them. These are the two halves both use.

// OutcomeInline is the largest outcome sent inside its message (a
// message is at most 1 MiB with its subject and headers); a larger one
// goes through the TRAWL_BLOBS object store.
const OutcomeInline = 768 << 10

// Offload returns what an outcome's message carries: data itself when it
// fits OutcomeInline, else stub(name), data being put in blobs under
// name first (the stub names it for Unload).
func Offload(ctx context.Context, blobs jetstream.ObjectStore, name string, data []byte, stub func(blob string) []byte) ([]byte, error) {
	if len(data) <= OutcomeInline {
		return data, nil
	}
	if err := PutBlob(ctx, blobs, name, data); err != nil {
		return nil, err
	}
	return stub(name), nil
}

// PutBlob puts data in blobs under name (Unload reads it).
func PutBlob(ctx context.Context, blobs jetstream.ObjectStore, name string, data []byte) error {
	octx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := blobs.Put(octx, jetstream.ObjectMeta{Name: name}, bytes.NewReader(data)); err != nil {
		return fmt.Errorf("jsnode: blob %s: %w", name, err)
	}
	return nil
}

// Unload reads the outcome an Offload put in blobs under name.
func Unload(ctx context.Context, blobs jetstream.ObjectStore, name string) ([]byte, error) {
	octx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	b, err := blobs.GetBytes(octx, name)
	if err != nil {
		return nil, fmt.Errorf("jsnode: blob %s: %w", name, err)
	}
	return b, nil
}

// Batch takes up to n of cons's messages, waiting up to wait for them
// all (for a caller that handles them together; one that handles each
// as it comes ranges over the fetch and asks Failed). Its error is the
// fetch's or the batch's (Failed): a caller that got an error and no
// message waits before it asks again (three loops asking at once took a
// cell's two cores when another cell was killed).
func Batch(cons jetstream.Consumer, n int, wait time.Duration) ([]jetstream.Msg, error) {
	b, err := cons.Fetch(n, jetstream.FetchMaxWait(wait))
	if err != nil {
		return nil, err
	}
	var msgs []jetstream.Msg
	for m := range b.Messages() {
		msgs = append(msgs, m)
	}
	if Failed(b) {
		return msgs, b.Error()
	}
	return msgs, nil
}

// Failed reports whether a fetched batch ended on an error other than a
// wait that ran out (a consumer without a leader fails at once, batch
// after batch: a caller that got no message from a failed batch waits
// before it asks again). Read once its messages are drained.
func Failed(b jetstream.MessageBatch) bool {
	err := b.Error()
	return err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded)
}

// Pause waits d, or until ctx ends.
func Pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// Collect takes cons's messages in batches of up to 64 until ctx ends,
// and acks each one apply took; one apply refused is offered again a
// second later, after failed is told why (unless ctx ended).
func Collect(ctx context.Context, cons jetstream.Consumer, apply func(data []byte) error, failed func(error)) {
	for ctx.Err() == nil {
		batch, err := cons.Fetch(64, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			Pause(ctx, time.Second)
			continue
		}
		got := 0
		for msg := range batch.Messages() { // each as it comes
			got++
			if err := apply(msg.Data()); err != nil {
				if ctx.Err() == nil {
					failed(err)
				}
				msg.NakWithDelay(time.Second)
				continue
			}
			msg.Ack()
		}
		if got == 0 && Failed(batch) {
			Pause(ctx, time.Second)
		}
	}
}
