// Package stripemock runs stripe-mock (Stripe's official API mock) on
// loopback for tests: Stripe providers are tested against it, never against
// Stripe. It is a test helper; nothing in a server imports it.
package stripemock

import (
	_ "embed"
	"errors"
	"fmt"
	"go/build"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/syncbuf"
)

//go:embed paid.json
var paidFixtures []byte

// stripeMockInstall is how the stripe-mock binary is installed; docs/payments.md
// and scripts/deps.sh say the same.
const stripeMockInstall = "go install github.com/stripe/stripe-mock@v0.203.0"

// stripeMock is one stripe-mock process on a loopback port.
type stripeMock struct {
	url string
	cmd *exec.Cmd
	out *syncbuf.Buffer // its stdout and stderr, for failure messages
	// exited is closed once the process has been reaped.
	exited <-chan struct{}
}

// Two servers, started on first use and killed by StopAll (a package's
// TestMain): "canned" with stripe-mock's own fixtures (an unpaid session, a
// PaymentIntent that requires a payment method, a customer without a
// default card), and "paid" with paid.json, the same fixtures edited into
// a paid world (default card, succeeded PaymentIntent with a receipt, paid
// session with trawl metadata). stripe-mock keeps no state: each answer is
// the fixture with the request's parameters reflected into it.
var mocks struct {
	sync.Mutex
	started map[string]*stripeMock
	errs    map[string]error
}

// StopAll kills the servers started; call it from TestMain after m.Run.
func StopAll() {
	mocks.Lock()
	for _, sm := range mocks.started {
		sm.stop()
	}
	mocks.started = nil
	mocks.Unlock()
}

// URL returns the base URL of the named stripe-mock ("canned" or "paid"),
// starting it if needed. It fails the test if stripe-mock is not
// installed.
func URL(t testing.TB, name string) string {
	t.Helper()
	mocks.Lock()
	defer mocks.Unlock()
	if sm, ok := mocks.started[name]; ok {
		return sm.url
	}
	if err, ok := mocks.errs[name]; ok {
		t.Fatal(err)
	}
	var fixtures string
	if name == "paid" {
		f, err := os.CreateTemp("", "stripe-mock-paid-*.json")
		if err == nil {
			_, err = f.Write(paidFixtures)
			f.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
		fixtures = f.Name()
	}
	sm, err := startStripeMock(fixtures)
	if fixtures != "" {
		defer os.Remove(fixtures) // stripe-mock reads it at start
	}
	if err != nil {
		if mocks.errs == nil {
			mocks.errs = map[string]error{}
		}
		mocks.errs[name] = err
		t.Fatal(err)
	}
	if mocks.started == nil {
		mocks.started = map[string]*stripeMock{}
	}
	mocks.started[name] = sm
	return sm.url
}

// findStripeMock looks at $STRIPE_MOCK, $PATH, then $GOBIN and $GOPATH/bin
// (where go install puts it, often not on $PATH).
func findStripeMock() (string, error) {
	if p := os.Getenv("STRIPE_MOCK"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("stripe-mock"); err == nil {
		return p, nil
	}
	var dirs []string
	if gobin := os.Getenv("GOBIN"); gobin != "" {
		dirs = append(dirs, gobin)
	}
	for _, gp := range filepath.SplitList(build.Default.GOPATH) {
		dirs = append(dirs, filepath.Join(gp, "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, "stripe-mock")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("stripe-mock not found (looked at $STRIPE_MOCK, $PATH, %s); install it with:\n\t%s\n(make test does this through scripts/deps.sh)", strings.Join(dirs, ", "), stripeMockInstall)
}

func startStripeMock(fixtures string) (*stripeMock, error) {
	bin, err := findStripeMock()
	if err != nil {
		return nil, err
	}
	// Both listeners on loopback with ports chosen by the kernel: with only
	// -http-addr, stripe-mock also opens HTTPS on :12112 on every interface.
	args := []string{"-http-addr", "127.0.0.1:0", "-https-addr", "127.0.0.1:0"}
	if fixtures != "" {
		args = append(args, "-fixtures", fixtures)
	}
	cmd := exec.Command(bin, args...)
	// stripe-mock prints every request to stdout: keep the start of it.
	out := &syncbuf.Buffer{Max: 1 << 20}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w (reinstall with %s)", bin, err, stripeMockInstall)
	}
	sm := &stripeMock{cmd: cmd, out: out}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	sm.exited = exited
	fail := func(err error) (*stripeMock, error) {
		sm.stop()
		return nil, fmt.Errorf("stripe-mock %v: %w\n%s", args, err, out.String())
	}
	// Poll for the address it prints once listening, then until it answers
	// an authenticated request.
	const prefix = "Listening for HTTP at address: "
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-exited:
			return fail(errors.New("exited"))
		default:
		}
		if sm.url == "" {
			if _, rest, ok := strings.Cut(out.String(), prefix); ok {
				if addr, _, ok := strings.Cut(rest, "\n"); ok {
					sm.url = "http://" + addr
				}
			}
		}
		var err error = errors.New("no listening address")
		if sm.url != "" {
			req, _ := http.NewRequest("GET", sm.url+"/v1/customers/cus_ready", nil)
			req.SetBasicAuth("sk_test_123", "")
			var resp *http.Response
			if resp, err = http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return sm, nil
				}
				err = fmt.Errorf("status %s", resp.Status)
			}
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("not ready within 30s: %w", err))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (sm *stripeMock) stop() {
	sm.cmd.Process.Kill()
	<-sm.exited
}
