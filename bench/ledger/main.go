// Command ledger measures the credit ledger for `make bench` (bench/run.sh,
// part "ledger"), each figure beside a baseline taken in the same run:
//
//	ledger throughput [-callers 256,1024] [-warmup 1s] [-duration 5s] [-diagnose]
//	                  [-only trawl|baseline|both] [-ledger raft|null] [-cpuprofile F]
//	    durable charges/s through ledger.HoldsClient (each Charge returns once its
//	    journal write is synced; group commit; settle loop running) over a
//	    real one-voter Raft ledger.Node, data on disk, and how fast the
//	    ledger absorbs them; baseline: one store.Set(…, store.Sync) per charge
//	    on internal/store at the same concurrency. CPU ms per 1,000 charges
//	    (user+system of the whole process). -diagnose adds the Client over a
//	    null ledger (no Raft, no FSM): the Client's own share.
//	ledger latency [-delay 150ms] [-rate 200] [-duration 5s] [-all-links]
//	    latency of a metered charge in a region 150 ms (one way) from the
//	    leader: three voters on 127.0.0.1/2/3 over real TCP (ledgertest), Raft
//	    connections and forwarded commands delayed on the links to it, the
//	    Client on the far voter; baseline: the same charge as its own Settle
//	    command through Raft (forwarded to the leader over the delayed path).
//	ledger growth [-at 100000,300000,1000000] [-batch 5000] [-label L]
//	    what the number of charges does to the replicated ledger: the state
//	    directory, a snapshot's bytes and time, a stopped follower's
//	    catch-up and a new voter's join, three voters on loopback; run on
//	    two builds (this commit and the one before) for the comparison.
//
// Each subcommand prints one JSON line on stdout; progress goes to stderr.
// Everything listens on loopback; data lives in -dir or a temp dir.
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/trawlhq/trawl/bench/measure"
	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/internal/testwait"
	"github.com/trawlhq/trawl/ledger"
	"github.com/trawlhq/trawl/ledger/ledgertest"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: ledger throughput|latency|growth [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "throughput":
		err = throughput(os.Args[2:])
	case "latency":
		err = latency(os.Args[2:])
	case "growth":
		err = growth(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ledger bench:", err)
		os.Exit(1)
	}
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "  ledger: "+format+"\n", args...)
}

// logger for the nodes, stores and client: errors only unless -v.
func newLogger(verbose bool) *slog.Logger {
	level := slog.LevelError
	if verbose {
		level = slog.LevelWarn
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

func workDir(dir string) (string, func(), error) {
	if dir != "" {
		return dir, func() {}, os.MkdirAll(dir, 0o755)
	}
	d, err := os.MkdirTemp("", "trawl-bench-ledger-")
	if err != nil {
		return "", nil, err
	}
	return d, func() { os.RemoveAll(d) }, nil
}

// ------------------------------------------------------------ throughput

type sideResult struct {
	Charges      int64   `json:"charges"`
	Seconds      float64 `json:"seconds"`
	PerS         float64 `json:"per_s"`
	CPUMsPer1000 float64 `json:"cpu_ms_per_1000"`
	P50Ms        float64 `json:"p50_ms"`
	P99Ms        float64 `json:"p99_ms"`
	// trawl only: the settle loop sends charges to the ledger behind the
	// callers' backs. Unsettled counts journaled charges the ledger has not
	// applied yet (at the window's start and end); DrainSeconds is how long
	// settling the rest took after the callers stopped. SettledPerS is what
	// the ledger absorbed: (backlog at start + charges in the window -
	// backlog left) / (window + drain), the rate the whole path sustains.
	// CPUMsPer1000Settle is the process CPU per 1,000 charges settled while
	// only settling ran (the drain); CPUMsPer1000Settled is the full cost of
	// a charge, its settlement included: the window's CPU less the
	// settling done in it (at the drain's rate), per charge, plus that rate.
	UnsettledStart      int64   `json:"unsettled_at_start,omitempty"`
	Unsettled           int64   `json:"unsettled_at_end,omitempty"`
	UnsettledLeft       int64   `json:"unsettled_after_drain,omitempty"`
	DrainSeconds        float64 `json:"drain_s,omitempty"`
	SettledPerS         float64 `json:"settled_per_s,omitempty"`
	CPUMsPer1000Settle  float64 `json:"cpu_ms_per_1000_settle,omitempty"`
	CPUMsPer1000Settled float64 `json:"cpu_ms_per_1000_settled,omitempty"`
	RaftCommands        uint64  `json:"raft_commands,omitempty"` // trawl: raft entries applied during the window
	ChargesPerCmd       float64 `json:"charges_per_command,omitempty"`
}

type runResult struct {
	Callers  int        `json:"callers"`
	Trawl    sideResult `json:"trawl"`
	Baseline sideResult `json:"baseline"`
	// ClientOnly (-diagnose): the Client over the null ledger, i.e. the
	// group-committed journal and its settle loop without Raft or the FSM.
	ClientOnly *sideResult `json:"client_only,omitempty"`
}

func throughput(args []string) error {
	fs := flag.NewFlagSet("throughput", flag.ExitOnError)
	callersFlag := fs.String("callers", "256,1024", "comma list of concurrent callers")
	warmup := fs.Duration("warmup", time.Second, "charges before each timed window")
	duration := fs.Duration("duration", 5*time.Second, "timed window per side and concurrency")
	accounts := fs.Int("accounts", 100, "accounts charged round-robin")
	amount := fs.Int64("amount", 5, "millicredits per charge (a light scrape costs 2-8)")
	drain := fs.Duration("drain", 20*time.Second, "longest wait for the settle backlog after a trawl window")
	dirFlag := fs.String("dir", "", "data dir (default: a temp dir, removed at exit)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the first trawl window and the settling of its backlog to this file")
	only := fs.String("only", "both", "trawl, baseline or both")
	ledgerKind := fs.String("ledger", "raft", "raft: the one-voter ledger.Node; null: a Submitter that grants and settles without work (diagnosis: the Client's journal alone)")
	blockprofile := fs.String("blockprofile", "", "write a blocking profile of the run to this file")
	diagnose := fs.Bool("diagnose", false, "also run the Client against the null ledger (no Raft, settles acknowledged without work) at each concurrency")
	verbose := fs.Bool("v", false, "log warnings of the nodes and stores")
	fs.Parse(args)
	var callers []int
	for _, s := range strings.Split(*callersFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return fmt.Errorf("bad -callers %q", *callersFlag)
		}
		callers = append(callers, n)
	}
	log := newLogger(*verbose)
	dir, cleanup, err := workDir(*dirFlag)
	if err != nil {
		return err
	}
	defer cleanup()

	// A one-voter ledger: a real Raft node, Pebble log and state on disk.
	one, err := ledgertest.Start(ledgertest.Options{
		Regions: []string{"eu"}, Dir: filepath.Join(dir, "node"), Secret: "bench", Logger: log,
		// Raft's defaults but for the timeouts: only the first election is sped up.
		RaftOf: map[string]ledger.RaftConfig{"eu": {HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond, LeaderLeaseTimeout: 100 * time.Millisecond}},
	})
	if err != nil {
		return fmt.Errorf("one-voter ledger: %w", err)
	}
	defer one.Close()
	node := one.Node("eu")
	raftAddr := one.Peer("eu").RaftAddr
	accts := make([]string, *accounts)
	for i := range accts {
		accts[i] = fmt.Sprintf("acct%03d", i)
		if err := fund(node, accts[i], ledger.Credits(1<<30)); err != nil {
			return err
		}
	}
	progress("one-voter ledger up (%s), %d accounts funded", raftAddr, len(accts))

	if *blockprofile != "" {
		runtime.SetBlockProfileRate(10000) // one sample per 10 µs blocked
		defer func() {
			if f, err := os.Create(*blockprofile); err == nil {
				pprof.Lookup("block").WriteTo(f, 0)
				f.Close()
			}
		}()
	}
	var prof *os.File
	if *cpuprofile != "" {
		if prof, err = os.Create(*cpuprofile); err != nil {
			return err
		}
		defer prof.Close()
	}
	out := struct {
		Amount     int64       `json:"amount_mc"`
		Accounts   int         `json:"accounts"`
		GOMAXPROCS int         `json:"gomaxprocs"`
		Runs       []runResult `json:"runs"`
	}{Amount: *amount, Accounts: *accounts, GOMAXPROCS: runtime.GOMAXPROCS(0)}
	for _, n := range callers {
		rr := runResult{Callers: n}
		if *only != "baseline" {
			run := trawlRun{
				callers: n, warmup: *warmup, window: *duration, drain: *drain, accts: accts, amount: ledger.MC(*amount),
				dir: dir, region: fmt.Sprintf("eu-c%d", n), ledger: node, node: node, prof: prof, log: log,
			}
			if *ledgerKind == "null" {
				run.ledger, run.node = nullLedger{}, nil
			}
			res, err := runTrawl(run)
			if err != nil {
				return err
			}
			prof = nil // one profile: the first trawl window and its drain
			rr.Trawl = res
		}
		if *diagnose && *only != "baseline" && *ledgerKind != "null" {
			res, err := runTrawl(trawlRun{
				callers: n, warmup: *warmup, window: *duration, drain: *drain, accts: accts, amount: ledger.MC(*amount),
				dir: dir, region: fmt.Sprintf("eu-null-c%d", n), ledger: nullLedger{}, log: log,
			})
			if err != nil {
				return err
			}
			rr.ClientOnly = &res
		}
		if *only != "trawl" {
			st, err := store.Open(filepath.Join(dir, fmt.Sprintf("baseline-c%d", n)), &store.Options{Logger: log})
			if err != nil {
				return err
			}
			now := time.Now().UTC()
			progress("baseline: store.Set(…, store.Sync) per charge, %d callers, %s warm-up + %s", n, *warmup, *duration)
			res, err := drive(n, *warmup, *duration, func(i uint64) error {
				v, err := json.Marshal(ledger.Charge{Account: accts[i%uint64(len(accts))], Receipt: "r/baseline/" + strconv.FormatUint(i, 10), Amount: ledger.MC(*amount), Time: now})
				if err != nil {
					return err
				}
				return st.Set(binary.BigEndian.AppendUint64([]byte("H/c/"), i), v, store.Sync)
			}, windowHooks{})
			st.Close()
			if err != nil {
				return fmt.Errorf("baseline, %d callers: %w", n, err)
			}
			rr.Baseline = res
			progress("baseline: %.0f charges/s, %.2f CPU ms/1000, p50 %.2f ms, p99 %.2f ms", res.PerS, res.CPUMsPer1000, res.P50Ms, res.P99Ms)
		}
		out.Runs = append(out.Runs, rr)
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

// nullLedger grants every hold in full and settles every batch without
// doing anything: with it the figure is the Client's own journal path.
type nullLedger struct{}

func (nullLedger) Submit(_ context.Context, cmd *ledger.Command) (*ledger.Result, error) {
	res := &ledger.Result{Index: 1, Holds: map[string]ledger.MC{}}
	switch {
	case cmd.Hold != nil:
		res.Granted = cmd.Hold.Want
		res.Holds[cmd.Hold.Account] = 1 << 50
	case cmd.Settle != nil:
		res.Settled = len(cmd.Settle.Charges)
		for _, c := range cmd.Settle.Charges {
			res.Holds[c.Account] = 1 << 50
		}
	}
	return res, nil
}

type trawlRun struct {
	callers               int
	warmup, window, drain time.Duration
	accts                 []string
	amount                ledger.MC
	dir, region           string
	ledger                ledger.Submitter
	node                  *ledger.Node // for raft counters; nil with the null ledger
	prof                  *os.File     // CPU profile of the window and the drain, if set
	log                   *slog.Logger
}

// runTrawl charges through a fresh ledger.HoldsClient (its own region journal, so
// each window starts with an empty journal and new holds), then waits for
// the settle loop to empty the journal.
func runTrawl(r trawlRun) (sideResult, error) {
	st, err := store.Open(filepath.Join(r.dir, r.region), &store.Options{Logger: r.log})
	if err != nil {
		return sideResult{}, err
	}
	defer st.Close()
	c, err := ledger.NewHoldsClient(ledger.HoldsConfig{Region: r.region, Store: st, Ledger: r.ledger, Logger: r.log})
	if err != nil {
		return sideResult{}, err
	}
	c.Start()
	defer c.Close()
	what := "one-voter Raft ledger"
	if r.node == nil {
		what = "null ledger (diagnosis)"
	}
	progress("trawl: ledger.HoldsClient.Charge over the %s, %d callers, %s warm-up + %s", what, r.callers, r.warmup, r.window)
	ctx := context.Background()
	prefix := "r/" + r.region + "/"
	applied := func() uint64 {
		if r.node == nil {
			return 0
		}
		return r.node.State().Meta().AppliedIndex
	}
	var applied0, applied1 uint64
	var unsettled0, res1 int64
	var cpu0, cpu1 time.Duration
	res, err := drive(r.callers, r.warmup, r.window, func(i uint64) error {
		return c.Charge(ctx, r.accts[i%uint64(len(r.accts))], prefix+strconv.FormatUint(i, 10), r.amount)
	}, windowHooks{
		start: func() {
			applied0, unsettled0, cpu0 = applied(), c.Pending(), measure.CPUTime()
			if r.prof != nil {
				pprof.StartCPUProfile(r.prof)
			}
		},
		end: func() { applied1, res1, cpu1 = applied(), c.Pending(), measure.CPUTime() },
	})
	if err != nil {
		return sideResult{}, fmt.Errorf("trawl, %d callers: %w", r.callers, err)
	}
	res.UnsettledStart, res.Unsettled = unsettled0, res1
	res.RaftCommands = applied1 - applied0
	if res.RaftCommands > 0 {
		res.ChargesPerCmd = round3(float64(res.Charges) / float64(res.RaftCommands))
	}
	t0 := time.Now()
	testwait.Poll(r.drain, func() bool { return c.Pending() == 0 })
	res.DrainSeconds = round3(time.Since(t0).Seconds())
	cpu2 := measure.CPUTime()
	if r.prof != nil {
		pprof.StopCPUProfile()
	}
	res.UnsettledLeft = c.Pending()
	if res.UnsettledLeft > 0 {
		progress("trawl: %d charges still unsettled after %s", res.UnsettledLeft, r.drain)
	}
	res.SettledPerS = math.Round(float64(unsettled0+res.Charges-res.UnsettledLeft) / (res.Seconds + res.DrainSeconds))
	// Price settling from the drain only when there was enough of it to
	// measure (a backlog of at least 20,000 charges and half a second).
	if drained := res.Unsettled - res.UnsettledLeft; r.node != nil && drained >= 20000 && res.DrainSeconds >= 0.5 && res.Charges > 0 {
		settle := float64((cpu2 - cpu1).Nanoseconds()) / 1e6 / float64(drained) // ms per charge settled
		inWindow := float64(unsettled0 + res.Charges - res.Unsettled)           // settled during the window
		chargePath := (float64((cpu1-cpu0).Nanoseconds())/1e6 - inWindow*settle) / float64(res.Charges)
		res.CPUMsPer1000Settle = round3(settle * 1000)
		res.CPUMsPer1000Settled = round3((chargePath + settle) * 1000)
	} else if res.Charges > 0 { // the ledger kept up: the window's CPU covers both
		res.CPUMsPer1000Settled = round3(float64((cpu2 - cpu0).Nanoseconds()) / 1e6 / float64(unsettled0+res.Charges-res.UnsettledLeft) * 1000)
	}
	progress("trawl: %.0f charges/s, %.2f CPU ms/1000, p50 %.2f ms, p99 %.2f ms; unsettled %d at the start, %d at the end, settled %.2fs later: %.0f settled/s; settling alone %.2f CPU ms/1000, a charge with its settlement %.2f",
		res.PerS, res.CPUMsPer1000, res.P50Ms, res.P99Ms, res.UnsettledStart, res.Unsettled, res.DrainSeconds, res.SettledPerS, res.CPUMsPer1000Settle, res.CPUMsPer1000Settled)
	return res, nil
}

type windowHooks struct{ start, end func() }

// drive runs callers goroutines calling fn with distinct numbers, for warmup
// and then a timed window, and reports the window: completed calls, rate,
// process CPU per 1,000 and the latency of calls that ended in it.
func drive(callers int, warmup, window time.Duration, fn func(i uint64) error, hooks windowHooks) (sideResult, error) {
	var (
		next, done atomic.Uint64
		phase      atomic.Int32 // 0 warm-up, 1 window, 2 stop
		firstErr   error
		errOnce    sync.Once
		wg         sync.WaitGroup
		lats       = make([][]float64, callers)
	)
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []float64
			for {
				p := phase.Load()
				if p == 2 {
					break
				}
				i := next.Add(1)
				t := time.Now()
				if err := fn(i); err != nil {
					errOnce.Do(func() { firstErr = err })
					phase.Store(2)
					break
				}
				d := time.Since(t)
				done.Add(1)
				if p == 1 && phase.Load() == 1 {
					mine = append(mine, float64(d.Nanoseconds())/1e6)
				}
			}
			lats[g] = mine
		}()
	}
	time.Sleep(warmup)
	if hooks.start != nil {
		hooks.start()
	}
	cpu0, n0, t0 := measure.CPUTime(), done.Load(), time.Now()
	phase.CompareAndSwap(0, 1)
	time.Sleep(window)
	phase.CompareAndSwap(1, 2)
	cpu1, n1, t1 := measure.CPUTime(), done.Load(), time.Now()
	if hooks.end != nil {
		hooks.end()
	}
	wg.Wait()
	if firstErr != nil {
		return sideResult{}, firstErr
	}
	var all []float64
	for _, l := range lats {
		all = append(all, l...)
	}
	slices.Sort(all)
	n := int64(n1 - n0)
	secs := t1.Sub(t0).Seconds()
	r := sideResult{Charges: n, Seconds: round3(secs), PerS: math.Round(float64(n) / secs),
		P50Ms: round3(measure.Percentile(all, 50)), P99Ms: round3(measure.Percentile(all, 99))}
	if n > 0 {
		r.CPUMsPer1000 = round3(float64((cpu1 - cpu0).Nanoseconds()) / 1e6 / float64(n) * 1000)
	}
	return r, nil
}

// fund creates acct and grants it amount.
func fund(n *ledger.Node, acct string, amount ledger.MC) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	now := time.Now().UTC()
	for _, cmd := range []*ledger.Command{
		{ID: "create/" + acct, Type: ledger.CmdCreateAccount, Time: now, CreateAccount: &ledger.CreateAccount{Account: acct, Plan: ledger.PlanFree}},
		{ID: "grant/" + acct, Type: ledger.CmdGrant, Time: now, Grant: &ledger.Grant{Account: acct, Bucket: ledger.BucketSignup, Amount: amount}},
	} {
		if err := submit(ctx, n, cmd); err != nil {
			return err
		}
	}
	return nil
}

func submit(ctx context.Context, n *ledger.Node, cmd *ledger.Command) error {
	res, err := n.Submit(ctx, cmd)
	if err != nil {
		return fmt.Errorf("%s: %w", cmd.ID, err)
	}
	if res.Error != "" {
		return fmt.Errorf("%s refused: %s: %s", cmd.ID, res.Error, res.Message)
	}
	return nil
}

// --------------------------------------------------------------- latency

type latResult struct {
	N      int     `json:"n"`
	Errors int     `json:"errors"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	MeanMs float64 `json:"mean_ms"`
	MaxMs  float64 `json:"max_ms"`
}

var regions = []string{"eu", "sin", "us"}

func latency(args []string) error {
	fs := flag.NewFlagSet("latency", flag.ExitOnError)
	delay := fs.Duration("delay", 150*time.Millisecond, "added one-way delay between the far region and the others")
	far := fs.String("far", "us", "the Client's region (eu leads; sin is the third voter)")
	allLinks := fs.Bool("all-links", false, "delay eu<->sin too (a commit then waits for a far follower)")
	rate := fs.Float64("rate", 200, "metered charges per second (open loop) through the Client")
	duration := fs.Duration("duration", 5*time.Second, "timed window of the Client side")
	warmup := fs.Duration("warmup", time.Second, "metered charges before the window (holds taken, rate learnt)")
	baseRate := fs.Float64("base-rate", 50, "charges per second (open loop) of the Settle-per-charge baseline")
	baseDuration := fs.Duration("base-duration", 4*time.Second, "window of the baseline")
	accounts := fs.Int("accounts", 10, "accounts charged round-robin")
	amount := fs.Int64("amount", 5, "millicredits per charge")
	dirFlag := fs.String("dir", "", "data dir (default: a temp dir, removed at exit)")
	verbose := fs.Bool("v", false, "log warnings of the nodes and stores")
	fs.Parse(args)
	if !slices.Contains(regions, *far) || *far == "eu" {
		return fmt.Errorf("-far must be sin or us (eu leads)")
	}
	log := newLogger(*verbose)
	dir, cleanup, err := workDir(*dirFlag)
	if err != nil {
		return err
	}
	defer cleanup()

	linkDelay := func(from, to string) time.Duration {
		if from == to {
			return 0
		}
		if from == *far || to == *far || *allLinks {
			return *delay
		}
		return 0
	}
	cl, err := startCluster(dir, linkDelay, log)
	if err != nil {
		return err
	}
	defer cl.Close()
	progress("3 voters up: leader %s; %s is %s (one way) from the others%s", cl.leader, *far, *delay,
		map[bool]string{true: ", eu<->sin too", false: ""}[*allLinks])

	farNode := cl.nodes[*far]
	accts := make([]string, *accounts)
	for i := range accts {
		accts[i] = fmt.Sprintf("acct%02d", i)
		if err := fund(cl.nodes["eu"], accts[i], ledger.Credits(1<<20)); err != nil {
			return err
		}
	}
	// The baseline's account, with a hold in the far region that covers
	// every charge it settles.
	if err := fund(cl.nodes["eu"], "direct", ledger.Credits(1<<20)); err != nil {
		return err
	}
	ctx := context.Background()
	if err := submit(ctx, cl.nodes["eu"], &ledger.Command{ID: "hold/direct", Type: ledger.CmdHold, Time: time.Now().UTC(),
		Hold: &ledger.HoldRequest{Account: "direct", Region: *far, Want: ledger.Credits(1 << 19)}}); err != nil {
		return err
	}

	st, err := store.Open(filepath.Join(dir, "client-"+*far), &store.Options{Logger: log})
	if err != nil {
		return err
	}
	defer st.Close()
	c, err := ledger.NewHoldsClient(ledger.HoldsConfig{Region: *far, Store: st, Ledger: farNode, Logger: log})
	if err != nil {
		return err
	}
	c.Start()
	defer c.Close()
	amt := ledger.MC(*amount)

	// trawl: ledger.HoldsClient.Charge in the far region. Warm-up first: each
	// account's first charge takes its hold through the delayed path.
	progress("trawl: metered charges through ledger.HoldsClient in %s at %.0f/s, %s warm-up + %s", *far, *rate, *warmup, *duration)
	var seq atomic.Uint64
	charge := func() error {
		i := seq.Add(1)
		return c.Charge(ctx, accts[i%uint64(len(accts))], "m/"+strconv.FormatUint(i, 10), amt)
	}
	if _, err := openLoop(*rate, *warmup, charge); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	trawlRes, err := openLoop(*rate, *duration, charge)
	if err != nil {
		return err
	}
	progress("trawl: p50 %.3f ms, p99 %.3f ms over %d charges", trawlRes.P50Ms, trawlRes.P99Ms, trawlRes.N)

	// baseline: the same charge waits for its own Raft commit: a Settle
	// command submitted on the far region's voter, forwarded to the leader.
	progress("baseline: one Settle per charge via %s's voter at %.0f/s for %s", *far, *baseRate, *baseDuration)
	var bseq atomic.Uint64
	baseRes, err := openLoop(*baseRate, *baseDuration, func() error {
		i := bseq.Add(1)
		now := time.Now().UTC()
		rcpt := "direct/" + strconv.FormatUint(i, 10)
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return submit(cctx, farNode, &ledger.Command{ID: "settle/" + rcpt, Type: ledger.CmdSettle, Time: now,
			Settle: &ledger.Settle{Region: *far, Charges: []ledger.Charge{{Account: "direct", Receipt: rcpt, Amount: amt, Time: now}}}})
	})
	if err != nil {
		return err
	}
	progress("baseline: p50 %.1f ms, p99 %.1f ms over %d charges", baseRes.P50Ms, baseRes.P99Ms, baseRes.N)

	return json.NewEncoder(os.Stdout).Encode(struct {
		DelayMs  float64   `json:"delay_ms"`
		Leader   string    `json:"leader"`
		Region   string    `json:"client_region"`
		AllLinks bool      `json:"all_links"`
		Rate     float64   `json:"rate"`
		BaseRate float64   `json:"base_rate"`
		Trawl    latResult `json:"trawl"`
		Baseline latResult `json:"baseline"`
	}{float64(delay.Milliseconds()), cl.leader, *far, *allLinks, *rate, *baseRate, trawlRes, baseRes})
}

// openLoop starts fn at a fixed rate for d, each call in its own goroutine
// (a slow call does not delay the next: no coordinated omission), and
// reports the latencies once all have returned.
func openLoop(rate float64, d time.Duration, fn func() error) (latResult, error) {
	interval := time.Duration(float64(time.Second) / rate)
	n := int(d / interval)
	lats := make([]float64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		if w := time.Until(start.Add(time.Duration(i) * interval)); w > 0 {
			time.Sleep(w)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.Now()
			errs[i] = fn()
			lats[i] = float64(time.Since(t).Nanoseconds()) / 1e6
		}()
	}
	wg.Wait()
	var r latResult
	var ok []float64
	var first error
	for i, err := range errs {
		if err != nil {
			r.Errors++
			if first == nil {
				first = err
			}
			continue
		}
		ok = append(ok, lats[i])
	}
	if len(ok) == 0 {
		return r, fmt.Errorf("all %d calls failed: %w", n, first)
	}
	if first != nil {
		progress("%d of %d calls failed, first: %v", r.Errors, n, first)
	}
	slices.Sort(ok)
	var sum float64
	for _, v := range ok {
		sum += v
	}
	r.N = len(ok)
	r.P50Ms, r.P99Ms = round3(measure.Percentile(ok, 50)), round3(measure.Percentile(ok, 99))
	r.MeanMs, r.MaxMs = round3(sum/float64(len(ok))), round3(ok[len(ok)-1])
	return r, nil
}

// ---------------------------------------------------------- the cluster

// cluster is three voters, one per region on 127.0.0.1/2/3, with real TCP
// (ledgertest): Raft connections and forwarded commands between regions are
// delayed by linkDelay in each direction.
type cluster struct {
	*ledgertest.Cluster
	nodes  map[string]*ledger.Node
	leader string
}

func startCluster(dir string, linkDelay func(from, to string) time.Duration, log *slog.Logger) (*cluster, error) {
	c, err := ledgertest.Start(ledgertest.Options{
		Regions: regions, Dir: dir, Secret: "bench", Logger: log, Delay: linkDelay,
		HTTPTimeout: 10 * time.Second, LeaderTimeout: 20 * time.Second,
		// Raft's defaults (1 s), but eu's election timer fires first so
		// it normally leads; otherwise leadership is handed to it below.
		RaftOf: map[string]ledger.RaftConfig{
			"eu":  {HeartbeatTimeout: 400 * time.Millisecond, ElectionTimeout: 400 * time.Millisecond, LeaderLeaseTimeout: 400 * time.Millisecond},
			"sin": {}, "us": {},
		},
	})
	if err != nil {
		return nil, err
	}
	cl := &cluster{Cluster: c, nodes: map[string]*ledger.Node{}}
	for _, r := range regions {
		cl.nodes[r] = c.Node(r)
	}
	leaderIs := func(id string) func() bool {
		return func() bool {
			n := cl.nodes[id]
			if !n.IsLeader() {
				return false
			}
			for _, o := range cl.nodes { // every voter knows it
				if _, l := o.Raft().LeaderWithID(); string(l) != id {
					return false
				}
			}
			return true
		}
	}
	anyLeader := func() bool {
		for id := range cl.nodes {
			if leaderIs(id)() {
				return true
			}
		}
		return false
	}
	if err := testwait.Poll(20*time.Second, anyLeader); err != nil {
		cl.Close()
		return nil, fmt.Errorf("no leader: %w", err)
	}
	if !cl.nodes["eu"].IsLeader() {
		for _, n := range cl.nodes {
			if n.IsLeader() {
				progress("%s leads; handing leadership to eu", n.ID())
				if err := n.Raft().LeadershipTransferToServer("eu", raft.ServerAddress(c.Peer("eu").RaftAddr)).Error(); err != nil {
					cl.Close()
					return nil, fmt.Errorf("leadership transfer: %w", err)
				}
			}
		}
		if err := testwait.Poll(20*time.Second, leaderIs("eu")); err != nil {
			cl.Close()
			return nil, fmt.Errorf("eu never led: %w", err)
		}
	}
	cl.leader = "eu"
	return cl, nil
}

// --------------------------------------------------------------- helpers

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
