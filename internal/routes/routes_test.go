package routes

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/trawlhq/trawl/internal/metering"
)

// The rules the table replaces, as they were written before it (auth's
// DefaultPublic, meter's classify, the gate's Local, route's job ids), so
// the table is checked against them path by path.
var oldPublic = []string{"/v1/prices", "/signup", "/signup/*", "/health", "/internal/*", "/v1/billing/checkout/*"}

func wasPublic(path string) bool {
	for _, p := range oldPublic {
		if pre, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(path, pre) {
				return true
			}
		} else if path == p {
			return true
		}
	}
	return false
}

func wasKind(method, p string) (string, int) {
	if p == "/search" && (method == http.MethodGet || method == http.MethodHead) {
		return metering.KindSearch, 1 // new with the table: the gate gathers it
	}
	if method != http.MethodPost {
		return "", 0
	}
	switch {
	case p == "/scrape":
		return metering.KindScrape, 1
	case p == "/scrape/batch":
		return metering.KindBatch, 0
	case p == "/scrape/jobs":
		return metering.KindJob, 0
	case strings.HasPrefix(p, "/scrape/jobs/") && strings.HasSuffix(p, "/retry"):
		return metering.KindJob, 1
	}
	return "", 0
}

func wasLocal(p, region, own string) bool {
	switch {
	case p == "/search": // new with the table: the gate gathers it from its cells
		return true
	case p == "/health", p == "/signup", strings.HasPrefix(p, "/signup/"), strings.HasPrefix(p, "/internal/"):
		return true
	case p == "/v1/billing/usage":
		return region == "" || region == own
	case strings.HasPrefix(p, "/v1/"):
		return true
	}
	return false
}

var paths = []string{
	"/", "/health", "/health/", "/internal/", "/internal/ledger/status", "/internal/ledger/apply",
	"/signup", "/signup/", "/signup/verify", "/signup/nope",
	"/v1/prices", "/v1/prices/", "/v1/keys", "/v1/keys/", "/v1/keys/key_1", "/v1/estimate",
	"/v1/billing/usage", "/v1/billing/balance", "/v1/billing/settings", "/v1/billing/topup",
	"/v1/billing/checkout/", "/v1/billing/checkout/cs_1", "/v1/billing/checkout/cs_1/complete", "/v1/billing/checkout/cs_1/x/y",
	"/v1/ledger/journal", "/v1/nope", "/v1",
	"/scrape", "/scrape/", "/scrape/batch", "/scrape/jobs", "/scrape/jobs/j_eu.c1.5f2a09c3e1d4b7a86f10",
	"/scrape/jobs/j_eu.c1.5f2a09c3e1d4b7a86f10/results", "/scrape/jobs/j_sin.c2.5f2a09c3e1d4b7a86f10/retry",
	"/scrape/jobs/nope", "/demo/", "/demo/page.html", "/search", "/nope", "/internal", "/v1/billing/checkout", "/signup/verify/x",
}

func TestTableKeepsTheOldRules(t *testing.T) {
	tab := Default()
	for _, p := range paths {
		for _, method := range []string{"GET", "HEAD", "POST", "DELETE", "PATCH"} {
			for _, region := range []string{"", "eu", "sin"} {
				target := p
				if region != "" {
					target += "?region=" + region
				}
				r := httptest.NewRequest(method, target, nil)
				m := tab.Match(r)
				if got, want := m.Public, wasPublic(p); got != want {
					t.Errorf("%s %s: public %v, was %v", method, p, got, want)
				}
				kind, count := "", 0
				if m.Allowed && m.Kind != "" {
					kind, count = m.Kind, 1
					if m.PerURL {
						count = 0 // from the body
					}
				}
				if wk, wc := wasKind(method, p); kind != wk || count != wc {
					t.Errorf("%s %s: bills %q×%d, billed %q×%d", method, p, kind, count, wk, wc)
				}
				if got, want := m.Place(r, "eu").Local, wasLocal(p, region, "eu"); got != want {
					t.Errorf("%s %s: local %v, was %v", method, target, got, want)
				}
			}
		}
	}
}

// /recipes/health is public and answered by the gate, which gathers its
// cells' (§5.4); running a recipe needs a key.
func TestRecipeHealthIsPublic(t *testing.T) {
	m := Default().Match(httptest.NewRequest("GET", "/recipes/health", nil))
	if !m.Public || m.Pattern != "GET /recipes/health" || m.Server != Gate || m.Service != "recipes" || !m.RegionQuery {
		t.Errorf("/recipes/health: %+v", m.Route)
	}
	m = Default().Match(httptest.NewRequest("POST", "/recipes/page-links", nil))
	if m.Public || m.Kind != metering.KindRecipe || !m.Allowed {
		t.Errorf("POST /recipes/page-links: %+v", m.Route)
	}
}

// Every operator route needs an operator key, checked by trawl_auth from
// the row before the body is read.
func TestOperatorRoutesNeedTheRole(t *testing.T) {
	for _, r := range Rows {
		if strings.HasPrefix(r.Path(), "/operator/") && r.Role != RoleOperator {
			t.Errorf("%s: role %q", r.Pattern, r.Role)
		}
	}
}

// A service's rows are its Gate rows, in table order; Row finds a row by
// its pattern.
func TestServiceAndRow(t *testing.T) {
	var got []string
	for _, r := range Default().Service("issues") {
		got = append(got, r.Pattern)
	}
	if want := []string{"POST /v1/issues", "GET /operator/v1/issues"}; !slices.Equal(got, want) {
		t.Errorf("issues: %q, want %q", got, want)
	}
	if rows := Default().Service("nope"); len(rows) != 0 {
		t.Errorf("an unknown service: %v", rows)
	}
	if r := Default().Row("POST /v1/issues"); r == nil || r.BodyLimit != FormBody {
		t.Errorf("Row(POST /v1/issues): %+v", r)
	}
	if r := Default().Row("/v1/issues"); r != nil {
		t.Errorf("Row(/v1/issues): %+v, want none (a row's pattern has its method)", r)
	}
}

// Every Firecrawl route answers errors, the gate's too, in Firecrawl's
// envelope: its SDKs read error, code and details from it.
func TestFirecrawlRoutesTakeItsEnvelope(t *testing.T) {
	n := 0
	for _, r := range Rows {
		if strings.HasPrefix(r.Path(), "/v2/") {
			n++
			if r.Envelope != EnvelopeFirecrawl {
				t.Errorf("%s: envelope %q", r.Pattern, r.Envelope)
			}
		} else if r.Envelope != "" {
			t.Errorf("%s: a native route with envelope %q", r.Pattern, r.Envelope)
		}
	}
	if n == 0 {
		t.Fatal("no /v2/ route")
	}
}

func TestPlace(t *testing.T) {
	tab := Default()
	tests := []struct {
		method, target string
		want           Place
	}{
		{"GET", "/scrape/jobs/j_eu.c1.5f2a09c3e1d4b7a86f10", Place{Region: "eu", Cell: "c1", Owner: "j_eu.c1.5f2a09c3e1d4b7a86f10"}},
		{"DELETE", "/scrape/jobs/j_eu.c1.5f2a09c3e1d4b7a86f10", Place{Region: "eu", Cell: "c1", Owner: "j_eu.c1.5f2a09c3e1d4b7a86f10"}},
		{"GET", "/scrape/jobs/j_sin.c2.5f2a09c3e1d4b7a86f10/results", Place{Region: "sin", Owner: "j_sin.c2.5f2a09c3e1d4b7a86f10"}},
		{"POST", "/scrape/jobs/j_sin.c2.5f2a09c3e1d4b7a86f10/retry", Place{Region: "sin", Owner: "j_sin.c2.5f2a09c3e1d4b7a86f10"}},
		{"GET", "/scrape/jobs/nope", Place{Region: "eu", Owner: "nope", NoOwner: true}},
		// A region's job id names no cell: placed over the ready cells.
		{"GET", "/v2/batch/scrape/j_eu.5f2a09c3e1d4b7a86f10", Place{Region: "eu", Owner: "j_eu.5f2a09c3e1d4b7a86f10", Placed: true}},
		{"GET", "/scrape/jobs/j_sin.5f2a09c3e1d4b7a86f10", Place{Region: "sin", Owner: "j_sin.5f2a09c3e1d4b7a86f10"}},
		{"POST", "/scrape", Place{Region: "eu"}},
		{"GET", "/v1/billing/usage", Place{Local: true, Region: "eu"}},
		{"GET", "/v1/billing/usage?region=eu", Place{Local: true, Region: "eu"}},
		{"GET", "/v1/billing/usage?region=us", Place{Region: "us"}},
		{"GET", "/v1/billing/balance?region=us", Place{Local: true, Region: "eu"}},
		{"GET", "/health", Place{Local: true, Region: "eu"}},
		// A monitor belongs to its region (any live cell of it reads the
		// region's monitor store), in the former grammar too.
		{"GET", "/monitors/mon_eu.c2.5f2a09c3e1d4b7a86f10", Place{Region: "eu", Owner: "mon_eu.c2.5f2a09c3e1d4b7a86f10"}},
		{"GET", "/monitors/mon_eu.5f2a09c3e1d4b7a86f10", Place{Region: "eu", Owner: "mon_eu.5f2a09c3e1d4b7a86f10"}},
		{"PATCH", "/monitors/mon_sin.c1.5f2a09c3e1d4b7a86f10", Place{Region: "sin", Owner: "mon_sin.c1.5f2a09c3e1d4b7a86f10"}},
		{"GET", "/monitors/mon_us.c1.5f2a09c3e1d4b7a86f10/versions/abc", Place{Region: "us", Owner: "mon_us.c1.5f2a09c3e1d4b7a86f10"}},
		{"GET", "/monitors/j_eu.c1.5f2a09c3e1d4b7a86f10/events", Place{Region: "eu", Owner: "j_eu.c1.5f2a09c3e1d4b7a86f10", NoOwner: true}},
		{"GET", "/monitors", Place{Region: "eu"}},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(tt.method, tt.target, nil)
		if got := tab.Match(r).Place(r, "eu"); got != tt.want {
			t.Errorf("%s %s: %+v, want %+v", tt.method, tt.target, got, tt.want)
		}
	}
}

func TestMatch(t *testing.T) {
	tab := Default()
	tests := []struct {
		method, path, pattern string
		allowed               bool
	}{
		{"POST", "/scrape", "POST /scrape", true},
		{"GET", "/scrape", "POST /scrape", false},
		{"HEAD", "/health", "GET /health", true},
		{"POST", "/health", "GET /health", false},
		{"DELETE", "/v1/keys/key_1", "DELETE /v1/keys/{id}", true},
		{"POST", "/v1/keys", "POST /v1/keys", true},
		{"PUT", "/internal/ledger/apply", "/internal/", true},
		{"GET", "/v1//prices", "GET /v1/prices", true}, // as after the redirect its server answers
		{"GET", "/signup/../v1/keys", "GET /v1/keys", true},
		{"GET", "/elsewhere", "/", true},
	}
	for _, tt := range tests {
		m := tab.Match(httptest.NewRequest(tt.method, "http://gate"+tt.path, nil))
		if m.Pattern != tt.pattern || m.Allowed != tt.allowed {
			t.Errorf("%s %s: %q allowed %v, want %q %v", tt.method, tt.path, m.Pattern, m.Allowed, tt.pattern, tt.allowed)
		}
	}
}

func TestNewRefusesABadTable(t *testing.T) {
	tests := []struct {
		rows []Route
		err  string
	}{
		{[]Route{{Pattern: "GET /a", Server: Cell}, {Pattern: "GET /a", Server: Cell}}, "twice"},
		{[]Route{{Pattern: "GET /a"}}, "no server"},
		{[]Route{{Pattern: "GET /a", Server: Gate}}, "names its service"},
		{[]Route{{Pattern: "GET /a", Server: Cell, Service: "x"}}, "only gate routes"},
		{[]Route{{Pattern: "GET /a/{id}", Server: Owner}}, "id grammar"},
		{[]Route{{Pattern: "GET /a/{x}", Server: Owner, Owner: Jobs}}, "{id}"},
		{[]Route{{Pattern: "GET /a", Server: Cell, RegionQuery: true}}, "another region"},
		{[]Route{{Pattern: "DELETE /a", Server: Cell, Kind: metering.KindScrape}}, "billed route is a POST or a GET"},
		{[]Route{{Pattern: "POST /a", Server: Cell, PerURL: true}}, "PerURL"},
		{[]Route{{Pattern: "GET /a", Server: Cell}, {Pattern: "POST /a", Server: Cell, Public: true}}, "share a path"},
		{[]Route{{Pattern: "GET /a", Server: Cell}, {Pattern: "/a", Server: Cell}}, "every method"},
		{[]Route{{Pattern: "GET /a/{", Server: Cell}}, "GET /a/{"},
		{[]Route{{Pattern: "POST /a", Server: Cell, Relay: true}}, "relays"},
		{[]Route{{Pattern: "POST /a", Server: Gate, Service: "x", Public: true, Relay: true}}, "relays"},
		{[]Route{{Pattern: "POST /a", Server: Gate, Service: "x", Kind: metering.KindScrape, Relay: true}}, "relays"},
		{[]Route{{Pattern: "GET /a", Server: Gate, Service: "x", Public: true, Role: RoleOperator}}, "role"},
		{[]Route{{Pattern: "GET /a", Server: Gate, Service: "x"}, {Pattern: "POST /a", Server: Gate, Service: "x", Role: RoleOperator}}, "share a path"},
	}
	for _, tt := range tests {
		if _, err := New(tt.rows); err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%+v: error %v, want %q", tt.rows, err, tt.err)
		}
	}
}

func TestRowsDocumentThemselves(t *testing.T) {
	for _, r := range append(Default().Rows(), CellLocal...) {
		if r.Doc == "" {
			t.Errorf("%q has no Doc", r.Pattern)
		}
		// A CellLocal row is never sent a client's body: only its region's
		// gate calls it (the release of a held job sends none).
		if r.Method() == http.MethodPost && r.Server != Gate && r.BodyLimit == 0 && r.Kind != metering.KindJob && !slices.Contains(CellLocal, r) {
			t.Errorf("%q takes a body but has no limit", r.Pattern)
		}
	}
}
