package estimate

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/internal/routes"
)

// route is the path of the handler's row.
const route = "/v1/estimate"

func serve(t *testing.T, obs *Observer) *httptest.Server {
	t.Helper()
	h, err := routes.Mux(routes.Default().Service("estimate"), Handlers(Config{Prices: billing.DefaultPrices(), Observer: obs, Logger: quiet()}), routes.MuxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func post(t *testing.T, srv *httptest.Server, method, path string, body io.Reader) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

func TestHandlerEstimate(t *testing.T) {
	srv := serve(t, seenObserver(t))
	// The scrape body as sent to /scrape, fields the estimate does not need
	// included.
	status, h, body := post(t, srv, "POST", route, strings.NewReader(
		`{"endpoint":"scrape","url":"https://light.com/a","format":"md","proxy":"none","parse":{"links":true}}`))
	if status != 200 || h.Get("Content-Type") != "application/json" || h.Get("Cache-Control") != "no-store" {
		t.Fatalf("%d %v %s", status, h, body)
	}
	var e Estimate
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatal(err)
	}
	if e.Min.String() != "1.000" || e.Max.String() != "1.000" || len(e.Parts) != 2 || !strings.HasPrefix(e.Text, "Scraping 1 page on light.com") {
		t.Errorf("estimate %+v", e)
	}
	for _, field := range []string{`"min":"1.000"`, `"max":"1.000"`, `"text":"`, `"parts":[{"name":"fixed","min":"1.000","max":"1.000","exact":true,"basis":"1 call × 1.000 per call, live at the light level"}`,
		`"domains":[{"domain":"light.com","urls":1,"seen":{"light":12,"browser":0,"browser_proxy":0},"min_level":"light","max_level":"light"}]`} {
		if !strings.Contains(body, field) {
			t.Errorf("body lacks %s:\n%s", field, body)
		}
	}

	// A job of 10,000 URLs over HTTP.
	var buf bytes.Buffer
	json.NewEncoder(&buf).Encode(map[string]any{"endpoint": "jobs", "urls": urls(10_000, "https://example.com/p/%d")})
	if status, _, body := post(t, srv, "POST", route, &buf); status != 200 || !strings.Contains(body, `"min":"10000.000"`) {
		t.Errorf("jobs: %d %.300s", status, body)
	}
}

func TestHandlerRefusals(t *testing.T) {
	srv := serve(t, nil)
	big := strings.Repeat(" ", int(routes.Default().Row("POST /v1/estimate").BodyLimit)+1) + `{"endpoint":"search"}`
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		want                     string
	}{
		{"unknown endpoint", "POST", route, `{"endpoint":"spider","url":"https://a.com/"}`, 400,
			`{"error":"bad_input","message":"unknown endpoint \"spider\": use one of scrape, batch, jobs, extract, map, crawl, search, answer, recipe, monitor"}`},
		{"missing url", "POST", route, `{"endpoint":"scrape"}`, 400,
			`{"error":"bad_input","message":"url is required: the page to scrape"}`},
		{"too many urls", "POST", route, `{"endpoint":"batch","urls":` + mustJSON(urls(51, "https://a.com/%d")) + `}`, 400,
			`{"error":"bad_input","message":"batch takes at most 50 urls (got 51); use jobs for up to 10,000"}`},
		{"invalid url", "POST", route, `{"endpoint":"batch","urls":["https://a.com/","http://[::1]/"]}`, 400,
			`{"error":"bad_input","message":"urls[1]: url host is not public: ::1"}`},
		{"urls not an array", "POST", route, `{"endpoint":"batch","urls":"https://a.com/"}`, 400,
			`{"error":"bad_input","message":"urls must be an array of strings"}`},
		{"url not a string", "POST", route, `{"endpoint":"scrape","url":7}`, 400,
			`{"error":"bad_input","message":"url must be a string"}`},
		{"not an object", "POST", route, `["scrape"]`, 400,
			`{"error":"bad_input","message":"the body must be a JSON object"}`},
		{"bad JSON", "POST", route, `{"endpoint":`, 400,
			`{"error":"bad_input","message":"the body is not valid JSON: unexpected EOF"}`},
		{"trailing data", "POST", route, `{"endpoint":"search"} {}`, 400,
			`{"error":"bad_input","message":"the body is not valid JSON: data after the object"}`},
		{"empty body", "POST", route, ``, 400,
			`{"error":"bad_input","message":"the body is empty; send a JSON object with endpoint and url or urls"}`},
		{"over 32 MiB", "POST", route, big, 413,
			`{"error":"too_large","message":"the body is over 32 MiB"}`},
		{"over 32 MiB, chunked", "POST", route, "chunked:" + big, 413,
			`{"error":"too_large","message":"the body is over 32 MiB"}`},
		{"method", "GET", route, ``, 405,
			`{"error":"method_not_allowed","message":"GET is not allowed on /v1/estimate; use POST"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader = strings.NewReader(tc.body)
			if rest, ok := strings.CutPrefix(tc.body, "chunked:"); ok {
				body = io.MultiReader(strings.NewReader(rest)) // no length: sent chunked
			}
			status, h, got := post(t, srv, tc.method, tc.path, body)
			if status != tc.status || got != tc.want+"\n" {
				t.Errorf("%d %s\nwant %d %s", status, got, tc.status, tc.want)
			}
			if status == 405 && h.Get("Allow") != "POST" {
				t.Errorf("Allow = %q", h.Get("Allow"))
			}
		})
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
