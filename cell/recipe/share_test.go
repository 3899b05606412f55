package recipe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/trawlhq/trawl/internal/jobid"
	"github.com/trawlhq/trawl/internal/jsnode"
	"github.com/trawlhq/trawl/internal/jsnode/jsnodetest"
	"github.com/trawlhq/trawl/internal/regionauth"
	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/internal/testwait"
)

// shopManifest is a background recipe with a session: one page a run.
const shopManifest = `{"name":"shop","version":1,"title":"Shop","kind":"json","outputs":["name"],"hosts":["shop.test"],"run":"job",
	"inputs":[{"name":"q","type":"string","required":true},{"name":"session","type":"string","need":"optional"}],
	"json":{"urls":["http://shop.test/list?q={q}"],"rows":{"baseSelector":"li","fields":[{"name":"name","type":"text"}]}}}`

// shopSite serves the shop to runs, in memory; a query starting with
// "slow" waits for release. It keeps the sessions it was sent.
type shopSite struct {
	mu       sync.Mutex
	sessions map[string]string // q → session
	fetches  map[string]int
	waiting  int
	release  chan struct{}
}

func newShopSite() *shopSite {
	return &shopSite{sessions: map[string]string{}, fetches: map[string]int{}, release: make(chan struct{})}
}

func (s *shopSite) Fetch(ctx context.Context, raw, session string) (*Fetched, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	q := u.Query().Get("q")
	s.mu.Lock()
	s.sessions[q] = session
	s.fetches[q]++
	slow := strings.HasPrefix(q, "slow")
	if slow {
		s.waiting++
	}
	s.mu.Unlock()
	if slow {
		defer func() { s.mu.Lock(); s.waiting--; s.mu.Unlock() }()
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	body := fmt.Sprintf("<ul><li>%s one</li><li>%s two</li></ul>", q, q)
	return &Fetched{URL: raw, Status: 200, ContentType: "text/html", Body: []byte(body), Engine: "http", Level: "http"}, nil
}

func (s *shopSite) waitingNow() int { s.mu.Lock(); defer s.mu.Unlock(); return s.waiting }

// sharedService is a cell's recipe service on a store that outlives it
// (a restart) unless the test gives it a new one (a lost disk).
func sharedService(t *testing.T, cell string, st *store.Store, site *shopSite, await bool) *Service {
	t.Helper()
	rc, err := Parse([]byte(shopManifest), nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Store: st, Fetcher: site, NoBuiltins: true, Extra: []*Recipe{rc}, Region: "eu", Cell: cell, AwaitShare: await,
		Logger: jsnodetest.Logger(t).With("cell", cell)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func memStore(t *testing.T) *store.Store {
	st, err := store.Open("db", &store.Options{FS: vfs.NewMem(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// submitShop submits a run of the shop recipe at s under an id that
// names cell, or names no cell when cell is "".
func submitShop(t *testing.T, s *Service, cell, account, q, session string) string {
	t.Helper()
	body := map[string][]byte{"q": fmt.Appendf(nil, "%q", q)}
	if session != "" {
		body["session"] = fmt.Appendf(nil, "%q", session)
	}
	raw := map[string]json.RawMessage{}
	for k, v := range body {
		raw[k] = v
	}
	rc, vals, bypass, err := s.Prepare("shop", raw)
	if err != nil {
		t.Fatal(err)
	}
	id := jobid.New("eu", cell)
	if cell == "" { // an id that names no cell, as a clustered cell mints
		id = jobid.NewPlaced("eu", func(string) bool { return true })
	}
	if _, err := s.Submit(account, id, rc, raw, vals, bypass); err != nil {
		t.Fatal(err)
	}
	return id
}

func waitJob(t *testing.T, s *Service, account, id string) *Job {
	t.Helper()
	var job *Job
	testwait.Until(t, 30*time.Second, "job "+id+" ended", func() bool {
		var err error
		job, err = s.Job(context.Background(), account, id)
		return err == nil && job.Status != JobRunning
	})
	return job
}

// Background runs of two cells are work items of one region: submitted
// to one, run on both, recorded and charged once by the one that took
// them; the caller's session reaches the page but is never readable in
// the queue; a run whose cell closes mid-run is run by the other; a
// down owner's runs are read from the log by the other cell; and an
// owner back on an empty disk takes its runs back from the log.
func TestSharedRecipeRuns(t *testing.T) {
	n := jsnodetest.Standalone(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	js := n.JetStream()
	if err := jsnode.Ensure(ctx, js, jsnode.RegionLayout(1, time.Hour)); err != nil {
		t.Fatal(err)
	}
	keys, _ := regionauth.ParseKeys(regionauth.NewKey())
	site := newShopSite()
	st1 := memStore(t)
	c1 := sharedService(t, "c1", st1, site, true)
	c2 := sharedService(t, "c2", memStore(t), site, true)
	var paused sync.Map // cell → true: its runners take nothing
	share := func(s *Service, cell string) {
		t.Helper()
		if err := s.Share(ctx, js, ShareConfig{Cell: cell, Seal: keys, Paused: func() bool { _, p := paused.Load(cell); return p }}); err != nil {
			t.Fatal(err)
		}
	}
	share(c1, "c1")
	share(c2, "c2")

	// The session in the queue: sealed.
	paused.Store("c1", true)
	paused.Store("c2", true)
	testwait.Until(t, 10*time.Second, "no runner waiting", func() bool { return c1.ShareStats().Idle+c2.ShareStats().Idle == 0 })
	secret := submitShop(t, c1, "c1", "acct", "tea", "sid=SECRET-COOKIE")
	work, err := js.Stream(ctx, jsnode.StreamWork)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := work.GetLastMsgForSubject(ctx, jsnode.SubjectRecipe+jsnode.Token(secret))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(msg.Data, []byte("SECRET-COOKIE")) || bytes.Contains(msg.Data, []byte("tea")) {
		t.Fatalf("the queued run holds its inputs readable: %s", msg.Data)
	}
	paused.Delete("c1")
	paused.Delete("c2")
	if job := waitJob(t, c1, "acct", secret); job.Status != JobDone || !strings.Contains(string(job.Rows), `"tea one"`) {
		t.Fatalf("the run with a session: %+v %s", job, job.Rows)
	}
	if got := site.sessions["tea"]; got != "sid=SECRET-COOKIE" {
		t.Fatalf("the page was sent session %q", got)
	}

	const runs = 12
	var ids []string
	for i := range runs {
		cell := "c1"
		if i%2 == 1 {
			cell = "" // half of them with ids that name no cell (ids[3] among them)
		}
		ids = append(ids, submitShop(t, c1, cell, "acct", fmt.Sprintf("q%d", i), ""))
	}
	for i, id := range ids {
		job := waitJob(t, c1, "acct", id)
		if job.Status != JobDone || !strings.Contains(string(job.Rows), fmt.Sprintf(`"q%d two"`, i)) || job.Units != 1 {
			t.Fatalf("run %s: %+v %s", id, job, job.Rows)
		}
	}
	charges, _ := c1.Charges(100)
	if s1, s2 := c1.ShareStats(), c2.ShareStats(); s1.Applied != runs+1 || s1.Ran+s2.Ran != runs+1 || len(charges) != runs+1 || s1.Duplicates != 0 {
		t.Fatalf("c1 %+v, c2 %+v, %d charges", s1, s2, len(charges))
	}
	t.Logf("c1 ran %d, c2 ran %d of %d", c1.ShareStats().Ran, c2.ShareStats().Ran, runs+1)
	if _, err := c1.Job(ctx, "another", ids[0]); !errors.Is(err, ErrNoJob) {
		t.Fatalf("another account's job: %v", err)
	}

	// A slow run on each cell; c2 closes mid-run: c1 runs it again. c1
	// then closes too, its store kept: its runs are read on c2 from the
	// log meanwhile.
	paused.Store("c1", true) // from here on, c2 runs everything
	testwait.Until(t, 10*time.Second, "no runner of c1 waiting", func() bool { return c1.ShareStats().Idle == 0 })
	slowA := submitShop(t, c1, "c1", "acct", "slow-a", "")
	testwait.Until(t, 10*time.Second, "c2 on the slow run", func() bool { return c2.ShareStats().Running == 1 })
	c2.Close()
	c2 = sharedService(t, "c2", memStore(t), site, true)
	share(c2, "c2")
	testwait.Until(t, 20*time.Second, "the slow run taken again", func() bool {
		return c2.ShareStats().Redelivered == 1 && c2.ShareStats().Running == 1
	})
	c1.Close() // the owner is down
	if job, err := c2.Job(ctx, "acct", ids[3]); err != nil || job.Status != JobDone || !strings.Contains(string(job.Rows), `"q3 one"`) {
		t.Fatalf("a down owner's finished run, read on c2: %+v %v", job, err)
	}
	if _, err := c2.Job(ctx, "another", ids[3]); !errors.Is(err, ErrNoJob) {
		t.Fatalf("another account's run, read on c2: %v", err)
	}
	if job, err := c2.Job(ctx, "acct", slowA); err != nil || job.Status != JobRunning {
		t.Fatalf("a down owner's running run, read on c2: %+v %v", job, err)
	}
	close(site.release) // c2 finishes it while c1 is down
	testwait.Until(t, 20*time.Second, "the down owner's run done in the log", func() bool {
		job, err := c2.Job(ctx, "acct", slowA)
		return err == nil && job.Status == JobDone
	})

	// c1 comes back on an empty store: until it shares, its runs are
	// 503; then they are back, finished, with their rows and charges.
	c1 = sharedService(t, "c1", memStore(t), site, true)
	if _, err := c1.Job(ctx, "acct", ids[0]); !errors.Is(err, ErrRestoring) {
		t.Fatalf("before sharing, a run of the lost store: %v", err)
	}
	share(c1, "c1")
	for _, id := range append(ids, slowA, secret) {
		job, err := c1.Job(ctx, "acct", id)
		if err != nil || job.Status != JobDone || len(job.Rows) == 0 {
			t.Fatalf("restored run %s: %+v %v", id, job, err)
		}
	}
	if st := c1.ShareStats(); st.Restored != runs+2 {
		t.Fatalf("restored %d, want %d", st.Restored, runs+2)
	}
	if n := site.fetches["slow-a"]; n != 2 {
		t.Errorf("the slow run fetched %d times, want 2 (once on c2 before it closed, once after)", n)
	}
	c2.Close()
	c1.Close()
}

// A shared run is never left running for good: one its cell recorded but
// never queued (it died in between) is failed by SweepLost a minute on,
// and one whose cells keep stopping mid-run is failed by the runner that
// takes its RecipeMaxDeliver-th delivery; neither is charged.
func TestLostAndCutOffRuns(t *testing.T) {
	n := jsnodetest.Standalone(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	js := n.JetStream()
	if err := jsnode.Ensure(ctx, js, jsnode.RegionLayout(1, time.Hour)); err != nil {
		t.Fatal(err)
	}
	keys, _ := regionauth.ParseKeys(regionauth.NewKey())
	site := newShopSite()
	st := memStore(t)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	start := func() *Service {
		t.Helper()
		s := sharedService(t, "c1", st, site, true)
		s.cfg.Now = clock
		if err := s.Share(ctx, js, ShareConfig{Cell: "c1", Seal: keys}); err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := start()
	lost := &jobRecord{Job: Job{ID: jobid.New("eu", "c1"), Recipe: "shop", Version: 1, Status: JobRunning, Created: clock().UTC()}, Owner: "acct", Shared: true}
	if err := s.saveJob(lost, store.Sync); err != nil {
		t.Fatal(err)
	}
	held := submitShop(t, s, "c1", "acct", "slow-cut", "")
	if n, err := s.SweepLost(ctx); err != nil || n != 0 {
		t.Fatalf("SweepLost at once: %d, %v", n, err)
	}
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	testwait.Until(t, 10*time.Second, "the held run taken", func() bool { return site.waitingNow() == 1 })
	if n, err := s.SweepLost(ctx); err != nil || n != 1 {
		t.Fatalf("SweepLost two minutes on: %d, %v; want the one lost run", n, err)
	}
	if job, _ := s.Job(ctx, "acct", lost.ID); job.Status != JobFailed || job.Error == nil || !strings.Contains(job.Error.Message, "lost") {
		t.Fatalf("the lost run: %+v", job)
	}
	if job, _ := s.Job(ctx, "acct", held); job.Status != JobRunning {
		t.Fatalf("the held run, queued and running: %+v", job)
	}
	// The held run's cell stops mid-run twice; the third delivery fails it.
	for range 2 {
		testwait.Until(t, 10*time.Second, "the held run running", func() bool { return site.waitingNow() == 1 && s.ShareStats().Running == 1 })
		s.Close()
		s = start()
	}
	job := waitJob(t, s, "acct", held)
	if job.Status != JobFailed || job.Error == nil || job.Error.Code != CodeTimeout || !strings.Contains(job.Error.Message, "cut off 2 times") {
		t.Fatalf("the run cut off twice: %+v %+v", job, job.Error)
	}
	if cs, _ := s.Charges(10); len(cs) != 0 {
		t.Fatalf("charges: %+v", cs)
	}
	if site.fetches["slow-cut"] != 2 {
		t.Errorf("the cut run was fetched %d times, want 2", site.fetches["slow-cut"])
	}
}
