package cell

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/trawlhq/trawl/internal/jsnode"
	"github.com/trawlhq/trawl/internal/monstore"
)

// Monitor checks as work items of the region's queue (cell/monitor,
// "Checks as work items"; docs/jetstream-design.md §5): once a clustered
// cell shares its work, the cell holding the coordinator lease claims
// every due check of the region and publishes each claimed record on
// jsnode.SubjectCheck; every cell's pullers take them one at a time and
// run them, telling JetStream they work on one (its AckWait is short, so
// a check of a cell that died runs elsewhere within seconds).

// checkQueue is the monitor service's view of the queue.
type checkQueue struct {
	c    *Cell
	js   jetstream.JetStream
	cons jetstream.Consumer
	// waiting is the queue's checks without a puller and ackPending
	// those taken and not done, as the consumer last said (refreshed by
	// Room).
	waiting, ackPending atomic.Int64
	stats               checkQueueStats
}

type checkQueueStats struct {
	queued, ran, redelivered atomic.Int64
}

// CheckQueueStats are the /health counters of the region's check queue.
type CheckQueueStats struct {
	Scheduling  bool  `json:"scheduling"`  // this cell claims and queues the region's checks
	Queued      int64 `json:"queued"`      // checks it queued as the scheduler
	Ran         int64 `json:"ran"`         // queued checks it ran, for any cell
	Redelivered int64 `json:"redelivered"` // of those, taken after an earlier delivery did not finish
	Waiting     int64 `json:"waiting"`     // the region's queued checks without a puller
	AckPending  int64 `json:"ack_pending"` // the region's queued checks taken and not done
}

func (q *checkQueue) Scheduling() bool { return q.c.Coordinating() }

// Room keeps a few claimed checks waiting for a puller, two rounds of
// this cell's slots: the rest stay due in the store, where a scheduler
// that takes over finds them.
func (q *checkQueue) Room(ctx context.Context) int {
	ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	info, err := q.cons.Info(ictx)
	if err != nil {
		return 0
	}
	q.waiting.Store(int64(info.NumPending))
	q.ackPending.Store(int64(info.NumAckPending))
	return 2*q.c.monitors.Parallel() - int(info.NumPending)
}

// Publish queues a claimed check under an id of its claim: the same claim
// queued twice is one item; a claim made again (the last one lapsed, or
// another scheduler's) is another.
func (q *checkQueue) Publish(ctx context.Context, cl monstore.Claimed) error {
	var rec struct {
		Claim *monstore.Claim `json:"claim"`
	}
	if err := json.Unmarshal(cl.Record, &rec); err != nil || rec.Claim == nil {
		return errors.New("a claimed record without its claim")
	}
	data, err := json.Marshal(cl)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	id := "check/" + cl.ID + "/" + rec.Claim.Instance + "/" + strconv.FormatInt(rec.Claim.Until.UnixNano(), 10)
	if _, err := jsnode.PublishData(pctx, q.js, jsnode.SubjectCheck, data, jetstream.WithMsgID(id)); err != nil {
		return err
	}
	q.stats.queued.Add(1)
	return nil
}

// shareChecks makes the cell's monitor checks work items of the region's
// queue, with the service's number of pullers, until ctx ends.
func (c *Cell) shareChecks(ctx context.Context, js jetstream.JetStream) error {
	if c.monitors == nil || c.cfg.Monitor.Shared == nil {
		return nil // monitors in the cell's own store: nothing to share
	}
	cons, err := js.Consumer(ctx, jsnode.StreamWork, jsnode.ConsumerCheck)
	if err != nil {
		return err
	}
	q := &checkQueue{c: c, js: js, cons: cons}
	for range c.monitors.Parallel() {
		c.js.wg.Go(func() { q.pull(ctx) })
	}
	c.checks.Store(q)
	c.monitors.SetQueue(q)
	return nil
}

// pull takes the region's queued checks one at a time and runs them.
func (q *checkQueue) pull(ctx context.Context) {
	for ctx.Err() == nil {
		if q.c.Drained() {
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
			continue
		}
		msg, err := jsnode.Next(ctx, q.cons, 10*time.Second)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) {
				q.c.cfg.Logger.Debug("monitor: pull a queued check", "err", err)
				select {
				case <-time.After(time.Second):
				case <-ctx.Done():
				}
			}
			continue
		}
		q.run(ctx, msg)
	}
}

func (q *checkQueue) run(ctx context.Context, msg jetstream.Msg) {
	var cl monstore.Claimed
	if err := json.Unmarshal(msg.Data(), &cl); err != nil || cl.ID == "" {
		q.c.cfg.Logger.Error("monitor: unreadable queued check dropped", "err", err)
		msg.Term()
		return
	}
	if md, err := msg.Metadata(); err == nil && md.NumDelivered > 1 {
		q.stats.redelivered.Add(1)
	}
	stop := jsnode.HeartbeatAt(ctx, msg, jsnode.CheckHeartbeatEvery)
	q.c.monitors.RunClaimed(ctx, cl)
	stop()
	if ctx.Err() != nil {
		msg.Nak() // closing: another cell takes it now
		return
	}
	q.stats.ran.Add(1)
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := msg.DoubleAck(actx); err != nil {
		// Delivered again: its write, if made, refuses the second.
		q.c.cfg.Logger.Debug("monitor: ack a queued check", "err", err)
	}
}

// CheckQueueStats reports the region's check queue as this cell sees it;
// nil before the cell shares its checks.
func (c *Cell) CheckQueueStats() *CheckQueueStats {
	q := c.checks.Load()
	if q == nil {
		return nil
	}
	return &CheckQueueStats{Scheduling: q.Scheduling(), Queued: q.stats.queued.Load(), Ran: q.stats.ran.Load(),
		Redelivered: q.stats.redelivered.Load(), Waiting: q.waiting.Load(), AckPending: q.ackPending.Load()}
}
