package usage

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/internal/routes"
	"github.com/trawlhq/trawl/ledger"
)

const (
	keyUser1 = "tk_user1_0123456789"
	keyUser2 = "tk_user2_0123456789"
	keyGone  = "tk_revoked_0123456789"
)

// newState is a ledger replica with acct1 and acct2 and a key each (and a
// revoked key of acct1).
func newState(t *testing.T) *ledger.State {
	t.Helper()
	st, err := ledger.OpenState(memStore(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	var index uint64
	apply := func(c ledger.Command) {
		index++
		c.ID, c.Time = fmt.Sprintf("setup-%d", index), t0
		res, err := st.Apply(&c, index)
		if err != nil || res.Error != "" {
			t.Fatalf("%s: %v %+v", c.Type, err, res)
		}
	}
	key := func(id, acct, secret string) {
		apply(ledger.Command{Type: ledger.CmdAddKey, AddKey: &ledger.Key{
			ID: id, Account: acct, Hash: billing.HashKey(secret), Prefix: secret[:6], Role: ledger.RoleUser, Kind: "permanent",
		}})
	}
	for _, a := range []string{"acct1", "acct2"} {
		apply(ledger.Command{Type: ledger.CmdCreateAccount, CreateAccount: &ledger.CreateAccount{Account: a, Plan: ledger.PlanFree}})
	}
	key("k1", "acct1", keyUser1)
	key("k2", "acct2", keyUser2)
	key("kr", "acct1", keyGone)
	apply(ledger.Command{Type: ledger.CmdRevokeKey, RevokeKey: &ledger.RevokeKey{KeyID: "kr"}})
	return st
}

// route is the path of the handler's row.
const route = "/v1/billing/usage"

type ctxAccount struct{}

type env struct {
	t   *testing.T
	log *Log
	srv *httptest.Server
}

// newEnv serves the route over loopback HTTP. A request with the header
// X-Test-Identity stands for one the gate's auth module already
// identified; any other is authenticated by key against the replica.
func newEnv(t *testing.T) *env {
	t.Helper()
	g := openLog(t, memStore(t, nil))
	h, err := routes.Mux(routes.Default().Service("usage"), Handlers(HandlerConfig{
		Log: g, Region: "eu", State: newState(t), Now: func() time.Time { return t0 }, Logger: quiet(),
		Identity: func(ctx context.Context) *ledger.Account {
			a, _ := ctx.Value(ctxAccount{}).(*ledger.Account)
			return a
		},
	}), routes.MuxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get("X-Test-Identity"); id != "" {
			r = r.WithContext(context.WithValue(r.Context(), ctxAccount{}, &ledger.Account{ID: id}))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return &env{t: t, log: g, srv: srv}
}

type reply struct {
	status int
	header http.Header
	body   string
}

func (e *env) do(method, target string, header ...string) reply {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+target, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return reply{resp.StatusCode, resp.Header, string(b)}
}

func (e *env) page(target string, header ...string) Page {
	e.t.Helper()
	r := e.do("GET", target, header...)
	if r.status != http.StatusOK {
		e.t.Fatalf("GET %s: %d %s", target, r.status, r.body)
	}
	var p Page
	if err := json.Unmarshal([]byte(r.body), &p); err != nil {
		e.t.Fatalf("GET %s: %v in %s", target, err, r.body)
	}
	return p
}

func TestHandlerPages(t *testing.T) {
	e := newEnv(t)
	for i := range 5 {
		record(t, e.log, line("acct1", i))
		record(t, e.log, line("acct2", i))
	}
	auth := []string{"Authorization", "Bearer " + keyUser1}

	p := e.page(route+"?limit=2", auth...)
	if p.Region != "eu" || p.Account != "acct1" || p.After != 0 || len(p.Lines) != 2 || !p.More || p.NextAfter != p.Lines[1].Seq {
		t.Fatalf("first page: %+v", p)
	}
	var all []Line
	all = append(all, p.Lines...)
	for p.More {
		p = e.page(fmt.Sprintf("%s?limit=2&after=%d", route, p.NextAfter), auth...)
		all = append(all, p.Lines...)
	}
	if len(all) != 5 {
		t.Fatalf("paged %d lines, want 5", len(all))
	}
	for i, l := range all {
		if l.Receipt != fmt.Sprintf("r_eu_acct1_%d", i) {
			t.Errorf("line %d: receipt %s (another account's line, or out of order)", i, l.Receipt)
		}
	}
	// At the end: an empty page that keeps after, to poll with.
	last := e.page(fmt.Sprintf("%s?after=%d", route, p.NextAfter), auth...)
	if len(last.Lines) != 0 || last.More || last.NextAfter != p.NextAfter {
		t.Errorf("page after the end: %+v", last)
	}
	if r := e.do("GET", fmt.Sprintf("%s?after=%d", route, p.NextAfter), auth...); !strings.Contains(r.body, `"lines":[]`) {
		t.Errorf("empty page has no lines array: %s", r.body)
	}

	// The identity the gate's auth module set wins; x-api-key works too.
	if p := e.page(route, "X-Test-Identity", "acct2"); p.Account != "acct2" || len(p.Lines) != 5 {
		t.Errorf("with identity: %s, %d lines", p.Account, len(p.Lines))
	}
	if p := e.page(route, "x-api-key", keyUser2); p.Account != "acct2" || len(p.Lines) != 5 {
		t.Errorf("with x-api-key: %s, %d lines", p.Account, len(p.Lines))
	}
	if p := e.page(route+"?region=eu", auth...); len(p.Lines) != 5 {
		t.Errorf("region=eu: %d lines", len(p.Lines))
	}
	if r := e.do("HEAD", route, auth...); r.status != http.StatusOK || r.body != "" {
		t.Errorf("HEAD: %d %q", r.status, r.body)
	}
}

func TestHandlerLineJSON(t *testing.T) {
	e := newEnv(t)
	record(t, e.log, line("acct1", 0))
	ex := &Line{
		Receipt: "r_eu_x", At: t0, Region: "eu", Account: "acct1", Call: billing.KindExtract,
		URL: "https://example.com/", Step: "extract", Engine: "model", Cache: billing.CacheMiss,
		Count: 1, LLMTokens: Tokens{In: 6000, Out: 800}, Units: billing.Amount(3000), Status: 200,
	}
	record(t, e.log, ex)
	r := e.do("GET", route, "Authorization", "Bearer "+keyUser1)
	if r.status != 200 || r.header.Get("Content-Type") != "application/json" || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("%d %v", r.status, r.header)
	}
	want := `{"region":"eu","account":"acct1","after":0,"lines":[` +
		`{"seq":1,"receipt":"r_eu_acct1_0","at":"2026-11-22T12:00:00.123Z","region":"eu","call":"scrape","url":"https://example.com/0","engine":"http","level":"light","cache":"miss","count":1,"units":"1.000","status":200},` +
		`{"seq":2,"receipt":"r_eu_x","at":"2026-11-22T12:00:00.123Z","region":"eu","call":"extract","url":"https://example.com/","step":"extract","engine":"model","cache":"miss","count":1,"llm_tokens":{"in":6000,"out":800},"units":"3.000","status":200}` +
		`],"next_after":2,"more":false}` + "\n"
	if r.body != want {
		t.Errorf("body:\n got %s\nwant %s", r.body, want)
	}
}

func TestHandlerRefusals(t *testing.T) {
	e := newEnv(t)
	auth := []string{"Authorization", "Bearer " + keyUser1}
	for _, tc := range []struct {
		name, method, target string
		header               []string
		status               int
		body                 string
	}{
		{"no key", "GET", route, nil, 401,
			`{"error":"unauthorized","message":"send your API key as Authorization: Bearer \u003ckey\u003e or x-api-key: \u003ckey\u003e"}`},
		{"unknown key", "GET", route, []string{"Authorization", "Bearer tk_nope"}, 401,
			`{"error":"unauthorized","message":"this API key is not valid"}`},
		{"revoked key", "GET", route, []string{"x-api-key", keyGone}, 401,
			`{"error":"unauthorized","message":"this API key was revoked; use another key of the account"}`},
		{"after not a number", "GET", route + "?after=x", auth, 400,
			`{"error":"bad_input","message":"after must be a whole number: the next_after of the page before, or 0"}`},
		{"after negative", "GET", route + "?after=-1", auth, 400,
			`{"error":"bad_input","message":"after must be a whole number: the next_after of the page before, or 0"}`},
		{"limit zero", "GET", route + "?limit=0", auth, 400,
			`{"error":"bad_input","message":"limit must be a whole number from 1 to 1000"}`},
		{"limit too big", "GET", route + "?limit=1001", auth, 400,
			`{"error":"bad_input","message":"limit must be a whole number from 1 to 1000"}`},
		{"limit twice", "GET", route + "?limit=1&limit=2", auth, 400,
			`{"error":"bad_input","message":"limit is given more than once"}`},
		{"other region", "GET", route + "?region=sin", auth, 400,
			`{"error":"bad_input","message":"this gate keeps the history of region eu; ask the gate of region sin (the public address forwards ?region=sin)"}`},
		{"method", "POST", route, auth, 405,
			`{"error":"method_not_allowed","message":"POST is not allowed on /v1/billing/usage; use GET"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(tc.method, tc.target, tc.header...)
			if r.status != tc.status || r.body != tc.body+"\n" {
				t.Errorf("%d %s\nwant %d %s", r.status, r.body, tc.status, tc.body)
			}
			if tc.status == 401 && r.header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			if tc.status == 405 && r.header.Get("Allow") != "GET" {
				t.Errorf("Allow = %q", r.header.Get("Allow"))
			}
		})
	}
}
