package signup_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/gate/signup"
	"github.com/trawlhq/trawl/internal/clientip"
	"github.com/trawlhq/trawl/internal/routes"
	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/ledger"
	"github.com/trawlhq/trawl/ledger/ledgertest"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

var secret = []byte("0123456789abcdef0123456789abcdef-test")

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// sentMail is one message a mailer was asked to send.
type sentMail struct{ to, subject, body string }

// memMailer keeps what it is asked to send; fail makes Send fail.
type memMailer struct {
	mu   sync.Mutex
	sent []sentMail
	fail atomic.Bool
}

func (m *memMailer) Send(_ context.Context, to, subject, body string) error {
	if m.fail.Load() {
		return errors.New("smtp server unreachable")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sent = append(m.sent, sentMail{to, subject, body})
	return nil
}

func (m *memMailer) last(t *testing.T) sentMail {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.sent) == 0 {
		t.Fatal("no mail sent")
	}
	return m.sent[len(m.sent)-1]
}

type env struct {
	t      *testing.T
	state  *ledger.State
	led    *ledgertest.Direct
	mailer *memMailer
	srv    *httptest.Server
	prices *billing.Prices
	now    atomic.Int64 // unix nanoseconds
	n      int
}

// newEnv serves the sign-up handler over real HTTP (loopback) on a State in
// memory, with the default price table and a clock at t0 the test moves.
func newEnv(t *testing.T) *env { return newEnvWithMailer(t, nil) }

// testClientHeader names the client address the env's server hands the
// handler, as the gate's front would after reading trusted proxies.
const testClientHeader = "X-Test-Client-Ip"

// perAddress, when set, is the per-address sign-up bound of the next env
// (the tests sign up from 127.0.0.1 many times: unbounded by default).
var perAddress = -1

// newEnvWithMailer is newEnv sending mail with m (nil: the env's memMailer).
func newEnvWithMailer(t *testing.T, m signup.Mailer) *env {
	t.Helper()
	st, err := store.Open("state", &store.Options{FS: vfs.NewMem(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	state, err := ledger.OpenState(st)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, state: state, led: ledgertest.NewDirect(state), mailer: &memMailer{}, prices: billing.DefaultPrices()}
	e.now.Store(t0.UnixNano())
	var h http.Handler
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// What the gate's front does with Caddy's client_ip (tests of the
		// whole gate: regiontest).
		if ip := r.Header.Get(testClientHeader); ip != "" {
			r = r.WithContext(clientip.With(r.Context(), ip))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(e.srv.Close)
	if m == nil {
		m = e.mailer
	}
	h = serve(t, signup.Config{
		Billing: billing.Config{State: state, Ledger: e.led, Prices: e.prices, Now: e.clock, Logger: quiet()},
		Mailer:  m, BaseURL: e.srv.URL + "/", TokenSecret: secret, PerAddressHour: perAddress,
	})
	return e
}

// serve mounts the package's handlers on the route table's signup rows,
// as the gate does.
func serve(t testing.TB, cfg signup.Config) http.Handler {
	t.Helper()
	mux, err := routes.Mux(routes.Default().Service("signup"), signup.Handlers(cfg), routes.MuxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return mux
}

func (e *env) clock() time.Time        { return time.Unix(0, e.now.Load()).UTC() }
func (e *env) advance(d time.Duration) { e.now.Add(int64(d)) }

type reply struct {
	status int
	header http.Header
	body   string
}

// do sends a request; key is sent as a bearer token unless empty.
func (e *env) do(method, path, key, body string) reply {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return e.send(req)
}

func (e *env) send(req *http.Request) reply {
	e.t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// form posts an HTML form.
func (e *env) form(path string, vals url.Values) reply {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+path, strings.NewReader(vals.Encode()))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return e.send(req)
}

var (
	keyRE  = regexp.MustCompile(`id="api-key">([^<]+)<`)
	linkRE = regexp.MustCompile(`https?://\S+/signup/verify\?token=\S+`)
)

// pageKey is the key shown on a page, "" when there is none.
func pageKey(body string) string {
	if m := keyRE.FindStringSubmatch(body); m != nil {
		return m[1]
	}
	return ""
}

// signup posts the form for email and returns the pass key and the link of
// the mail.
func (e *env) signup(email string) (pass, link string) {
	e.t.Helper()
	r := e.form("/signup", url.Values{"email": {email}})
	if r.status != http.StatusOK {
		e.t.Fatalf("sign-up %s: %d %s", email, r.status, r.body)
	}
	pass = pageKey(r.body)
	if pass == "" {
		e.t.Fatalf("no #api-key on the pass page: %s", r.body)
	}
	m := e.mailer.last(e.t)
	link = linkRE.FindString(m.body)
	if !strings.EqualFold(m.to, email) || link == "" {
		e.t.Fatalf("mail to %q without a link: %q", m.to, m.body)
	}
	return pass, link
}

// verify opens the link (the confirm page) and posts its form, as a browser
// does; it returns the verify page.
func (e *env) verify(link string) reply {
	e.t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		e.t.Fatal(err)
	}
	if g := e.do(http.MethodGet, u.RequestURI(), "", ""); g.status != http.StatusOK {
		return g
	}
	return e.form("/signup/verify", url.Values{"token": {u.Query().Get("token")}})
}

// authed authenticates key against the replica at the env's clock.
func (e *env) authed(key string) (*ledger.Key, *ledger.Account, error) {
	req, _ := http.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	return billing.Authenticate(e.state, req, e.clock())
}

func (e *env) accountOf(key string) *ledger.Account {
	e.t.Helper()
	_, a, err := e.authed(key)
	if err != nil {
		e.t.Fatalf("key %s…: %v", key[:10], err)
	}
	return a
}

func (e *env) bucket(acct, bucket string) ledger.MC {
	e.t.Helper()
	v, err := e.state.Balance(ledger.BucketAccount(acct, bucket))
	if err != nil {
		e.t.Fatal(err)
	}
	return v
}

func (e *env) audit() {
	e.t.Helper()
	rep, err := e.state.Audit()
	if err != nil {
		e.t.Fatal(err)
	}
	if !rep.OK() {
		e.t.Fatalf("audit: %v", rep.Violations)
	}
}

// ok applies a setup command directly.
func (e *env) ok(c ledger.Command) {
	e.t.Helper()
	e.n++
	if c.ID == "" {
		c.ID = fmt.Sprintf("setup-%d", e.n)
	}
	if c.Time.IsZero() {
		c.Time = e.clock()
	}
	res, err := e.led.Submit(context.Background(), &c)
	if err != nil || res.Error != "" {
		e.t.Fatalf("%s: %v %+v", c.Type, err, res)
	}
}
