package jsnode_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/trawlhq/trawl/internal/jsnode"
	"github.com/trawlhq/trawl/internal/jsnode/jsnodetest"
)

// The leader of the job log dies as a SIGKILL'd process does (its routes
// cut, no hand-over): a publish, a conditional write and a read from a
// survivor, each with Retry's attempts, are answered once the survivors
// have elected a leader, well within their deadline; the same calls
// tried once wait out their whole deadline (logged: that is NATS's
// behaviour, the reason for Retry).
func TestCallsAfterLeaderKilled(t *testing.T) {
	t.Parallel()
	c := jsnodetest.NewCluster(t)
	c.Cuttable = true
	nodes := []*jsnode.Node{c.Add("c1"), c.Add("c2"), c.Add("c3")}
	for _, n := range nodes {
		jsnodetest.Ready(t, n)
	}
	c.WaitPeers(3)
	ensure(t, nodes[0], 3)
	const subject = jsnode.SubjectJobLog + "c1.j1.meta"
	publish(t, nodes[1], subject, "before")

	leader, survivor, _ := streamLeader(t, nodes, jsnode.StreamJobLog)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := nodes[0].JetStream().Stream(ctx, jsnode.StreamJobLog)
	if err != nil {
		t.Fatal(err)
	}
	last, err := st.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		t.Fatal(err)
	}
	c.Cut(leader)
	cut := time.Now()
	js := survivor.JetStream()
	const deadline = 30 * time.Second
	var wg sync.WaitGroup
	took := func(what string, err error) {
		t.Helper()
		d := time.Since(cut)
		if err != nil {
			t.Errorf("%s after the leader %s was cut: %v after %v", what, leader, err, d)
			return
		}
		t.Logf("%s answered %v after the leader %s was cut", what, d.Round(10*time.Millisecond), leader)
		if d > 20*time.Second {
			t.Errorf("%s answered %v after the cut, want within 20 s (an election)", what, d)
		}
	}
	wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		_, err := jsnode.PublishData(ctx, js, jsnode.SubjectJobLog+"c1.j2.meta", []byte("after"))
		took("a publish", err)
	})
	wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		_, err := jsnode.PublishData(ctx, js, subject, []byte("over"), jetstream.WithExpectLastSequencePerSubject(last.Sequence))
		took("a write over the record read", err)
	})
	wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		err := jsnode.Retry(ctx, func(ctx context.Context) error {
			s, err := js.Stream(ctx, jsnode.StreamJobLog)
			if err == nil {
				_, err = s.Info(ctx)
			}
			return err
		})
		took("the stream's info", err)
	})
	wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 12*time.Second)
		defer cancel()
		_, err := js.Stream(ctx, jsnode.StreamJobLog)
		t.Logf("the stream's info tried once: %v after the cut (%v)", time.Since(cut).Round(10*time.Millisecond), err)
	})
	wg.Wait()
}

// streamLeader is the cell (c1…cn in nodes' order) whose node leads
// stream, one node that does not, and the stream's info.
func streamLeader(t *testing.T, nodes []*jsnode.Node, stream string) (string, *jsnode.Node, *jetstream.StreamInfo) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := nodes[0].JetStream().Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil || info.Cluster == nil {
		t.Fatalf("%s's info: %v", stream, err)
	}
	leader, other := "", (*jsnode.Node)(nil)
	for i, n := range nodes {
		if n.Name() == info.Cluster.Leader {
			leader = fmt.Sprintf("c%d", i+1)
		} else {
			other = n
		}
	}
	if leader == "" {
		t.Fatalf("%s's leader %q is none of the nodes", stream, info.Cluster.Leader)
	}
	return leader, other, info
}

// A message published twice with Publish (its answer lost, say) is
// stored once: the second is the first's duplicate.
func TestPublishRepeatStoredOnce(t *testing.T) {
	t.Parallel()
	n := jsnodetest.Standalone(t)
	ensure(t, n, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msg := &nats.Msg{Subject: jsnode.SubjectJobLog + "c1.j1.res.x", Data: []byte("x")}
	for i := range 2 {
		ack, err := jsnode.Publish(ctx, n.JetStream(), msg)
		if err != nil {
			t.Fatal(err)
		}
		if ack.Duplicate != (i == 1) || ack.Sequence != 1 {
			t.Errorf("try %d: %+v, want sequence 1 (a duplicate the second time)", i+1, ack)
		}
	}
}
