package members

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/trawlhq/trawl/internal/testwait"
)

// testLogger logs to t until the test ends; memberlist's goroutines may
// still write while they stop.
func testLogger(t *testing.T) (*slog.Logger, *testWriter) {
	w := &testWriter{t: t}
	t.Cleanup(func() { w.done.Store(true) }) // registered first, runs last
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo})), w
}

type testWriter struct {
	t    *testing.T
	done atomic.Bool
	mu   sync.Mutex
	all  strings.Builder
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.all.Write(p)
	w.mu.Unlock()
	if !w.done.Load() {
		w.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

func (w *testWriter) logged(s string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Contains(w.all.String(), s)
}

// testKeys is the test region's keyring.
var testKeys = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}

func start(t *testing.T, log *slog.Logger, cfg Config) *Cluster {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = log
	}
	if cfg.Keys == nil {
		cfg.Keys = testKeys
	}
	c, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

func cellMeta(name string) Meta {
	return Meta{Role: RoleCell, Region: "eu", Name: name, API: "127.0.0.1:80" + strings.TrimPrefix(name, "c"),
		Routes: "nats-route://127.0.0.1:74" + strings.TrimPrefix(name, "c")}
}

// kill stops c without leaving, as a SIGKILL would: the others must find out
// by failure detection.
func kill(t *testing.T, c *Cluster) {
	t.Helper()
	c.closeOnce.Do(func() {
		close(c.stop)
		<-c.joined
		c.closeErr = c.ml.Shutdown()
	})
}

func names(ms []Meta) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return out
}

func hasCells(c *Cluster, want ...string) bool {
	return slices.Equal(names(c.Live(RoleCell, "eu")), want)
}

// region starts a gate and two cells that join it, and waits until every
// member sees all three.
func region(t *testing.T, log *slog.Logger) (gate, c1, c2 *Cluster) {
	t.Helper()
	gate = start(t, log, Config{Meta: Meta{Role: RoleGate, Region: "eu", Name: "g1", API: "127.0.0.1:443"}})
	c1 = start(t, log, Config{Meta: cellMeta("c1"), Join: []string{gate.LocalAddr()}})
	c2 = start(t, log, Config{Meta: cellMeta("c2"), Join: []string{gate.LocalAddr()}})
	for _, c := range []*Cluster{gate, c1, c2} {
		testwait.Until(t, 10*time.Second, "all members join", func() bool {
			return hasCells(c, "c1", "c2") && len(c.Live(RoleGate, "eu")) == 1
		})

	}
	return gate, c1, c2
}

func TestLive(t *testing.T) {
	log, _ := testLogger(t)
	gate, c1, _ := region(t, log)
	if got, want := c1.Live(RoleCell, "eu"), []Meta{cellMeta("c1"), cellMeta("c2")}; !slices.Equal(got, want) {
		t.Errorf("cells seen by c1: %+v, want %+v", got, want)
	}
	if got := c1.Live(RoleGate, "eu"); len(got) != 1 || got[0].API != "127.0.0.1:443" {
		t.Errorf("gates seen by c1: %+v", got)
	}
	if got := gate.Live(RoleCell, "sin"); len(got) != 0 {
		t.Errorf("cells of sin: %+v", got)
	}
}

func TestKilledMemberIsGoneWithin5s(t *testing.T) {
	log, _ := testLogger(t)
	gate, c1, c2 := region(t, log)
	changed := gate.Watch()
	kill(t, c2)
	var wg sync.WaitGroup
	for _, c := range []*Cluster{gate, c1} {
		wg.Go(func() {
			took := testwait.Until(t, 10*time.Second, "killed cell leaves the live set", func() bool { return hasCells(c, "c1") })
			t.Logf("killed cell gone from %s's view after %v", c.ml.LocalNode().Name, took.Round(time.Millisecond))
			if took >= 5*time.Second {
				t.Errorf("killed cell gone after %v, want under 5s", took)
			}
		})
	}
	wg.Wait()
	select {
	case <-changed:
	default:
		t.Error("Watch channel not closed after a change")
	}
}

func TestClosedMemberIsGoneAtOnce(t *testing.T) {
	log, _ := testLogger(t)
	gate, _, c2 := region(t, log)
	begin := time.Now()
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c2.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	took := testwait.Until(t, 5*time.Second, "closed cell leaves", func() bool { return hasCells(gate, "c1") })
	t.Logf("closed cell gone after %v (Close included)", time.Since(begin).Round(time.Millisecond))
	if took > time.Second {
		t.Errorf("closed cell gone after %v, want at once", took)
	}
}

func TestRestartedMemberTakesOverItsName(t *testing.T) {
	log, _ := testLogger(t)
	gate, c1, c2 := region(t, log)
	kill(t, c2)
	// The same name on a new port and with a new API, before the others have
	// declared the old one dead.
	meta := cellMeta("c2")
	meta.API = "127.0.0.1:9999"
	start(t, log, Config{Meta: meta, Join: []string{gate.LocalAddr()}})
	for _, c := range []*Cluster{gate, c1} {
		took := testwait.Until(t, 15*time.Second, "restarted cell is live", func() bool {
			live := c.Live(RoleCell, "eu")
			return len(live) == 2 && live[1].API == meta.API
		})

		t.Logf("restarted cell live after %v", took.Round(time.Millisecond))
	}
}

func TestJoinsSeedThatStartsLater(t *testing.T) {
	log, w := testLogger(t)
	seed := freeAddr(t)
	cell := start(t, log, Config{Meta: cellMeta("c1"), Join: []string{seed}})
	testwait.Until(t, 5*time.Second, "a join attempt fails", func() bool { return w.logged("cannot reach membership seeds") })
	if got := cell.Live(RoleGate, "eu"); len(got) != 0 {
		t.Fatalf("gate live before it started: %+v", got)
	}
	gate := start(t, log, Config{Bind: seed, Meta: Meta{Role: RoleGate, Region: "eu", Name: "g1"}})
	if gate.LocalAddr() != seed {
		t.Fatalf("gate on %s, want %s", gate.LocalAddr(), seed)
	}
	took := testwait.Until(t, 10*time.Second, "the cell joins the late seed", func() bool {
		return hasCells(gate, "c1") && len(cell.Live(RoleGate, "eu")) == 1
	})

	t.Logf("joined %v after the seed started", took.Round(time.Millisecond))
}

// freeAddr returns a loopback address whose port is free for TCP and UDP.
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 10 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		p, err := net.ListenPacket("udp", addr)
		l.Close()
		if err == nil {
			p.Close()
			return addr
		}
	}
	t.Fatal("no free port for TCP and UDP")
	return ""
}

func TestStartRefuses(t *testing.T) {
	gate := Meta{Role: RoleGate, Region: "eu", Name: "g1"}
	tests := []struct {
		name string
		cfg  Config
		is   error
	}{
		{"meta too large", Config{Meta: Meta{Role: RoleCell, Region: "eu", Name: "c1", API: strings.Repeat("a", 500) + ":80"}}, ErrMetaTooLarge},
		{"no role", Config{Meta: Meta{Region: "eu", Name: "c1", API: "127.0.0.1:80"}}, nil},
		{"no region", Config{Meta: Meta{Role: RoleGate, Name: "g1"}}, nil},
		{"cell without API", Config{Meta: Meta{Role: RoleCell, Region: "eu", Name: "c1"}}, nil},
		{"API without port", Config{Meta: Meta{Role: RoleCell, Region: "eu", Name: "c1", API: "127.0.0.1"}}, nil},
		{"short key", Config{Meta: gate, Keys: [][]byte{[]byte("short")}}, nil},
		{"no keys", Config{Meta: gate, Keys: [][]byte{}}, ErrNoKeys},
		{"bind without port", Config{Meta: gate, Bind: "127.0.0.1"}, nil},
		{"routes with a password", Config{Meta: Meta{Role: RoleCell, Region: "eu", Name: "c1", API: "127.0.0.1:80", Routes: "nats-route://u:p@127.0.0.1:7422"}}, nil},
		{"routes without port", Config{Meta: Meta{Role: RoleCell, Region: "eu", Name: "c1", API: "127.0.0.1:80", Routes: "nats-route://127.0.0.1"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.cfg.Keys == nil {
				tt.cfg.Keys = testKeys
			}
			c, err := Start(tt.cfg)
			if err == nil {
				c.Close()
				t.Fatal("started")
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Fatalf("error %v, want %v", err, tt.is)
			}
			t.Log(err)
		})
	}
}

func TestLogWriter(t *testing.T) {
	var buf bytes.Buffer
	l := newStdLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		Level:       slog.LevelInfo,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr { return dropTime(a) },
	})))
	l.Printf("[DEBUG] memberlist: Stream connection from=127.0.0.1:1")
	l.Printf("[INFO] memberlist: Marking c2 as failed")
	l.Printf("[WARN] memberlist: Refuting a suspect message")
	l.Printf("[ERR] memberlist: Push/Pull failed")
	l.Printf("no level")
	want := `level=INFO msg="Marking c2 as failed"
level=WARN msg="Refuting a suspect message"
level=ERROR msg="Push/Pull failed"
level=INFO msg="no level"
`
	if got := buf.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func dropTime(a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

func Example() {
	log := slog.New(slog.DiscardHandler)
	// The region's keys: in production, TRAWL_REGION_KEYS (internal/regionauth).
	keys := [][]byte{[]byte("an example key of 32 bytes......")}
	gate, err := Start(Config{Bind: "127.0.0.1:0", Meta: Meta{Role: RoleGate, Region: "eu", Name: "g1"}, Keys: keys, Logger: log})
	if err != nil {
		panic(err)
	}
	defer gate.Close()
	cell, err := Start(Config{
		Bind:   "127.0.0.1:0",
		Join:   []string{gate.LocalAddr()},
		Meta:   Meta{Role: RoleCell, Region: "eu", Name: "c1", API: "127.0.0.1:8081"},
		Keys:   keys,
		Logger: log,
	})
	if err != nil {
		panic(err)
	}
	defer cell.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		changed := gate.Watch()
		if len(gate.Live(RoleCell, "eu")) > 0 {
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			panic("the cell did not join")
		}
	}
	for _, m := range gate.Live(RoleCell, "eu") {
		fmt.Println(m.Name, m.API)
	}
	// Output: c1 127.0.0.1:8081
}

// A process that reaches the gate's gossip port but lacks the region's
// keys must not become a member: not with a stock memberlist node that
// sends in the clear, not with our own code and another key.
func TestRogueMemberCannotJoin(t *testing.T) {
	log, _ := testLogger(t)
	gate, _, _ := region(t, log)

	// A plain memberlist node claiming to be a cell, no encryption.
	mc := memberlist.DefaultLANConfig()
	mc.Name = "cell:eu.rogue"
	mc.BindAddr, mc.BindPort = "127.0.0.1", 0
	mc.Label = "trawl/eu"
	mc.Logger = stdlog.New(io.Discard, "", 0)
	meta, _ := json.Marshal(Meta{Role: RoleCell, Region: "eu", Name: "rogue", API: "127.0.0.1:1"})
	d := &delegate{}
	d.meta.Store(&meta)
	mc.Delegate = d
	plain, err := memberlist.Create(mc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { plain.Shutdown() })
	if _, err := plain.Join([]string{gate.LocalAddr()}); err == nil {
		t.Error("an unencrypted node joined the region")
	}

	// Our own member with a key of another region.
	w, err := Start(Config{Meta: Meta{Role: RoleCell, Region: "eu", Name: "wrong", API: "127.0.0.1:2"}, Join: []string{gate.LocalAddr()}, Logger: log,
		Keys: [][]byte{[]byte("another region's key, 32 bytes..")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })

	// Give both a full probe and push-pull cycle's chance: a member that
	// joins is seen well within this (TestLive: under a second).
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		for _, m := range gate.Live(RoleCell, "eu") {
			if m.Name == "rogue" || m.Name == "wrong" {
				t.Fatalf("rogue member %q is live at the gate", m.Name)
			}
		}
		if plain.NumMembers() > 1 || w.ml.NumMembers() > 1 {
			t.Fatalf("rogue sees the region: plain %d, wrong key %d members", plain.NumMembers(), w.ml.NumMembers())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A meta change reaches the others; role, region and name cannot change,
// and a closed member changes nothing.
func TestUpdateMeta(t *testing.T) {
	log, _ := testLogger(t)
	gate, c1, _ := region(t, log)
	if err := c1.UpdateMeta(func(m *Meta) { m.Routes, m.JS = "nats-route://127.0.0.1:7422", JSReady }); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 5*time.Second, "the gate sees c1's new meta", func() bool {
		for _, m := range gate.Live(RoleCell, "eu") {
			if m.Name == "c1" {
				return m.JS == JSReady && m.Routes == "nats-route://127.0.0.1:7422"
			}
		}
		return false
	})
	if err := c1.UpdateMeta(func(m *Meta) { m.Name = "c9" }); err == nil {
		t.Error("a member renamed itself")
	}
	if err := c1.UpdateMeta(func(m *Meta) { m.Routes = "http://x" }); err == nil {
		t.Error("a bad route URL was accepted")
	}
	c1.Close()
	if err := c1.UpdateMeta(func(m *Meta) { m.JS = JSWaiting }); err == nil {
		t.Error("a closed member updated its meta")
	}
}
