package signup_test

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/gate/signup"
	"github.com/trawlhq/trawl/internal/browsertest"
	"github.com/trawlhq/trawl/ledger"
)

// startNode is a real one-voter ledger (Raft over TCP on 127.0.0.1, Pebble
// in a temporary directory), leading once it returns.
func startNode(t *testing.T) *ledger.Node {
	t.Helper()
	addr := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}
	raftAddr := addr()
	n, err := ledger.OpenNode(ledger.NodeConfig{
		ID: "eu", DataDir: filepath.Join(t.TempDir(), "ledger"), RaftAddr: raftAddr,
		Peers:     []ledger.Peer{{ID: "eu", RaftAddr: raftAddr, APIAddr: addr()}},
		Bootstrap: true, Secret: "test-secret", Logger: quiet(),
		Raft: ledger.RaftConfig{HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond, LeaderLeaseTimeout: 200 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	for deadline := time.Now().Add(20 * time.Second); !n.IsLeader(); {
		if time.Now().After(deadline) {
			t.Fatal("the ledger did not elect itself")
		}
		time.Sleep(10 * time.Millisecond) // polling the condition
	}
	return n
}

// screenshotDir keeps screenshots: TRAWL_TEST_ARTIFACTS when set (CI can
// keep them), else the test's temporary directory.
func screenshotDir(t *testing.T) string {
	if d := os.Getenv("TRAWL_TEST_ARTIFACTS"); d != "" {
		d = filepath.Join(d, t.Name())
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// TestSignupInChromium is the sign-up as a person does it, in headless
// Chromium: the form, the pass key, the mail (through a real SMTP server),
// the link, the permanent key. The ledger is a real one-voter Raft node.
func TestSignupInChromium(t *testing.T) {
	b := browsertest.Launch(t)
	node := startNode(t)
	state := node.State()
	sink := newSMTPSink(t, nil, nil)
	prices := billing.DefaultPrices()
	var h http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	h = serve(t, signup.Config{
		Billing:     billing.Config{State: state, Ledger: node, Prices: prices, Logger: quiet()},
		Mailer:      &signup.SMTPMailer{Addr: sink.addr, From: "trawl <noreply@trawl.example>"},
		BaseURL:     srv.URL,
		TokenSecret: secret,
	})
	shots := screenshotDir(t)
	p := b.NewPage()
	shot := func(name string) {
		t.Helper()
		path := filepath.Join(shots, name+".png")
		if _, err := p.Screenshot(playwright.PageScreenshotOptions{Path: playwright.String(path), FullPage: playwright.Bool(true)}); err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		t.Logf("screenshot: %s", path)
	}
	text := func(selector string) string {
		t.Helper()
		l := p.Locator(selector)
		if err := l.WaitFor(); err != nil {
			shot("failed")
			t.Fatalf("wait for %s on %s: %v", selector, p.URL(), err)
		}
		s, err := l.TextContent()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	authed := func(key string) (*ledger.Key, *ledger.Account, error) {
		req, _ := http.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		return billing.Authenticate(state, req, time.Now())
	}

	// The form.
	if _, err := p.Goto(srv.URL + "/signup"); err != nil {
		t.Fatal(err)
	}
	if err := p.Locator("#email").Fill("ann.lee@example.com"); err != nil {
		t.Fatal(err)
	}
	shot("1-form")
	if err := p.Locator("#submit").Click(); err != nil {
		t.Fatal(err)
	}

	// The pass key, shown once; it works.
	pass := text("#api-key")
	shot("2-pass-key")
	k, acct, err := authed(pass)
	if err != nil || k.Kind != signup.KindPass {
		t.Fatalf("pass key from the page: %+v %v", k, err)
	}
	if acct.Email != "ann.lee@example.com" {
		t.Fatalf("account %+v", acct)
	}

	// The mail, as the SMTP server received it; its link, in the browser.
	msgs := sink.messages()
	if len(msgs) != 1 || msgs[0].to[0] != "ann.lee@example.com" {
		t.Fatalf("mails received: %+v", msgs)
	}
	link := linkRE.FindString(parseMail(t, msgs[0].data).body)
	if link == "" {
		t.Fatalf("no link in the mail: %s", msgs[0].data)
	}
	t.Logf("verification link: %s", link)
	if _, err := p.Goto(link); err != nil {
		t.Fatal(err)
	}
	text("#verify")
	shot("3-verify")
	if err := p.Locator("#verify").Click(); err != nil {
		t.Fatal(err)
	}

	// The permanent key: it works, the pass key does not, the credit is
	// there.
	perm := text("#api-key")
	shot("4-permanent-key")
	if perm == pass {
		t.Fatal("verification showed the pass key again")
	}
	k, a, err := authed(perm)
	if err != nil || k.Kind != signup.KindPermanent || a.ID != acct.ID {
		t.Fatalf("permanent key: %+v %v", k, err)
	}
	if _, _, err := authed(pass); !errors.Is(err, billing.ErrRevokedKey) {
		t.Fatalf("pass key after verification: %v, want revoked", err)
	}
	bal, err := state.AccountBalance(a, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if bal.Buckets[ledger.BucketSignup] != prices.Grants.Signup.MC() || bal.Total != prices.Grants.Signup.MC()+prices.Grants.Pass.Credits.MC() {
		t.Fatalf("balance %+v: want the sign-up credit %s and the pass credit %s", bal, prices.Grants.Signup, prices.Grants.Pass.Credits)
	}

	// The link again: already verified, no key.
	if _, err := p.Goto(link); err != nil {
		t.Fatal(err)
	}
	text("#already-verified")
	if n, err := p.Locator("#api-key").Count(); err != nil || n != 0 {
		t.Fatalf("a second visit shows %d keys (%v)", n, err)
	}
	shot("5-already-verified")
	rep, err := state.Audit()
	if err != nil || !rep.OK() {
		t.Fatalf("audit: %+v %v", rep, err)
	}
}
