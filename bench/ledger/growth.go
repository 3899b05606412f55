package main

// ledger growth: what years of charges do to the replicated ledger.

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/trawlhq/trawl/internal/testwait"
	"github.com/trawlhq/trawl/ledger"
	"github.com/trawlhq/trawl/ledger/ledgertest"
)

type growthPoint struct {
	Charges       int     `json:"charges"`
	SubmitS       float64 `json:"submit_s"`        // settling them (charges through Raft, 3 voters)
	StateDirMB    float64 `json:"state_dir_mb"`    // the leader's state/ directory (journal included)
	SnapshotMB    float64 `json:"snapshot_mb"`     // what one snapshot carries
	SnapshotS     float64 `json:"snapshot_s"`      // taking it (Snapshot + Persist)
	CatchUpS      float64 `json:"catch_up_s"`      // a follower stopped before the charges, restarted
	JoinS         float64 `json:"join_s"`          // a new voter joined, until it has applied the head
	ChargesPerSec float64 `json:"settled_per_sec"` // charges settled per second
}

// growth settles charges from two regions' holds clients (as settle
// commands of -batch charges, epoch and sequence like ledger.HoldsClient sends,
// submitted straight to the leader) while the third voter is stopped, and
// at each of -at: the state on disk, a snapshot's size and time, the
// stopped voter's catch-up (from a snapshot: the log behind it is
// compacted) and a new voter's join. The same binary built at another
// commit measures that commit (bench/run.sh builds both).
func growth(args []string) error {
	fs := flag.NewFlagSet("growth", flag.ContinueOnError)
	at := fs.String("at", "100000,300000,1000000", "charge counts to measure at")
	batch := fs.Int("batch", 5000, "charges per settle command")
	dirFlag := fs.String("dir", "", "data directory (default: a temp dir, removed)")
	label := fs.String("label", "", "a label for the JSON line (the commit measured)")
	verbose := fs.Bool("v", false, "log warnings")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var points []int
	for _, s := range strings.Split(*at, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("-at: %w", err)
		}
		points = append(points, n)
	}
	dir, cleanup, err := workDir(*dirFlag)
	if err != nil {
		return err
	}
	defer cleanup()
	log := newLogger(*verbose)
	c, err := ledgertest.Start(ledgertest.Options{
		Regions: regions, Dir: dir, Secret: "bench", Logger: log,
		HTTPTimeout: 60 * time.Second, LeaderTimeout: 20 * time.Second,
		// Snapshots when the bench takes them; a short log behind them, so
		// a voter that is behind catches up from a snapshot.
		Raft: ledger.RaftConfig{SnapshotThreshold: 1 << 40, SnapshotInterval: time.Hour, TrailingLogs: 16},
	})
	if err != nil {
		return err
	}
	defer c.Close()
	leader, err := c.Leader(20 * time.Second)
	if err != nil {
		return err
	}
	if err := fund(leader, "acct", ledger.Credits(1<<40)); err != nil {
		return err
	}
	ctx := context.Background()
	now := time.Now().UTC()
	for _, r := range []string{"eu", "sin"} {
		if err := submit(ctx, leader, &ledger.Command{ID: "hold/" + r, Type: ledger.CmdHold, Time: now,
			Hold: &ledger.HoldRequest{Account: "acct", Region: r, Want: ledger.Credits(1 << 39)}}); err != nil {
			return err
		}
	}
	follower := "us"
	if leader.ID() == follower {
		follower = "sin"
	}
	if err := c.StopNode(follower); err != nil {
		return err
	}
	var out []growthPoint
	done, seq := 0, map[string]uint64{}
	joined := 0
	for _, target := range points {
		start := time.Now()
		for done < target {
			region := []string{"eu", "sin"}[(done/(*batch))%2]
			n := min(*batch, target-done)
			charges := make([]ledger.Charge, n)
			for i := range charges {
				seq[region]++
				charges[i] = ledger.Charge{Account: "acct", Receipt: fmt.Sprintf("%s-%d", region, seq[region]), Amount: 1, Time: now, Seq: seq[region]}
			}
			cmd := &ledger.Command{ID: fmt.Sprintf("settle/%s/E/%d", region, seq[region]), Type: ledger.CmdSettle, Time: now,
				Settle: &ledger.Settle{Region: region, Epoch: "E" + region, Charges: charges}}
			if err := submit(ctx, leader, cmd); err != nil {
				return err
			}
			done += n
		}
		p := growthPoint{Charges: done, SubmitS: time.Since(start).Seconds()}
		// Under load a leader may change: measure on the one there is.
		if leader, err = c.Leader(time.Minute); err != nil {
			return err
		}
		p.ChargesPerSec = round3(float64(done) / p.SubmitS)
		// What the billing loop drops every hour (results older than a
		// week), as if a week had passed.
		if err := compact(ctx, leader, fmt.Sprintf("compact/%d", done), now.Add(8*24*time.Hour), now.Add(8*24*time.Hour+time.Minute)); err != nil {
			return err
		}
		if err := leader.Barrier(time.Minute); err != nil {
			return err
		}
		p.StateDirMB = round3(float64(dirSize(filepath.Join(dir, leader.ID(), "ledger", "state"))) / 1e6)
		t0 := time.Now()
		f := leader.Raft().Snapshot()
		if err := f.Error(); err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
		p.SnapshotS = round3(time.Since(t0).Seconds())
		meta, rc, err := f.Open()
		if err != nil {
			return err
		}
		rc.Close()
		p.SnapshotMB = round3(float64(meta.Size) / 1e6)
		head := leader.State().Meta().AppliedIndex
		// Catch-up: the stopped voter restarts and has the head.
		if follower == leader.ID() {
			return fmt.Errorf("the stopped voter %s leads", follower)
		}
		t0 = time.Now()
		if err := c.StartNode(follower); err != nil {
			return err
		}
		if err := testwait.Poll(30*time.Minute, func() bool {
			n := c.Node(follower)
			return n != nil && n.State().Meta().AppliedIndex >= head
		}); err != nil {
			return fmt.Errorf("catch-up: %w", err)
		}
		p.CatchUpS = round3(time.Since(t0).Seconds())
		if err := c.StopNode(follower); err != nil {
			return err
		}
		// Join: a new voter, added through the leader's members API.
		joined++
		id := fmt.Sprintf("new%d", joined)
		t0 = time.Now()
		peer, err := c.AddNode(id)
		if err != nil {
			return err
		}
		body, _ := json.Marshal(peer)
		req, _ := http.NewRequest(http.MethodPost, "http://"+c.Peer(leader.ID()).APIAddr+ledger.MembersPath, bytes.NewReader(body))
		req.Header.Set("X-Ledger-Secret", "bench")
		resp, err := (&http.Client{Timeout: 30 * time.Minute}).Do(req)
		if err != nil {
			return fmt.Errorf("join: %w", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("join: %s", resp.Status)
		}
		if err := testwait.Poll(30*time.Minute, func() bool {
			n := c.Node(id)
			return n != nil && n.State().Meta().AppliedIndex >= head
		}); err != nil {
			return fmt.Errorf("join catch-up: %w", err)
		}
		p.JoinS = round3(time.Since(t0).Seconds())
		// Remove it again: the next point joins a new one.
		if leader, err = c.Leader(time.Minute); err != nil {
			return err
		}
		if err := leader.RemoveVoter(id); err != nil {
			return err
		}
		if err := c.StopNode(id); err != nil {
			return err
		}
		progress("growth %s: %+v", *label, p)
		out = append(out, p)
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"bench": "ledger growth", "label": *label, "batch": *batch, "points": out})
}

func dirSize(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			n += info.Size()
		}
		return nil
	})
	return n
}
