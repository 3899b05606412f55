package regiontest

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/cell"
	"github.com/trawlhq/trawl/cell/extract"
	"github.com/trawlhq/trawl/cell/llm"
	"github.com/trawlhq/trawl/cell/llm/llmtest"
	"github.com/trawlhq/trawl/gate/billing"
	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/ledger"
)

// GET /answer with the operator's model: the cells' model (a scripted
// local endpoint) writes the answer from the passages only, citing them;
// its tokens are billed with the answer per the price table. A model that
// finds no answer in the passages gives the quote (or answered false), and
// a model that fails is not an error for the caller.
func TestAnswerWithOperatorModel(t *testing.T) {
	var script func(n int, r llmtest.Request, w http.ResponseWriter)
	model := llmtest.NewServer(t, func(n int, r llmtest.Request, w http.ResponseWriter) { script(n, r, w) })
	client, err := llm.New(llm.Config{BaseURLs: map[string]string{"acme": model.URL + "/v1"}, Retries: -1}, "acme/small", "test-key")
	if err != nil {
		t.Fatal(err)
	}
	g := Start(t, Options{Cell: func(c *cell.Config) { c.Model = &extract.ModelConfig{Client: client} }})
	site := docsSite(t)
	key := g.Account(t, ledger.PlanSupporter, 1000)
	for _, p := range []string{"/volcano", "/glacier"} {
		if r := call(t, "POST", g.URL+"/scrape", key, `{"url":"`+site.URL+p+`"}`); r.status != 200 {
			t.Fatalf("scrape %s: %d %s", p, r.status, r.body)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); g.Cells[0].Cell.Indexed() < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("pages not indexed in 10 s")
		}
	}
	type answer struct {
		Answered bool `json:"answered"`
		Answer   struct {
			Kind    string
			Text    string
			Sources []struct{ Title, URL string }
		} `json:"answer"`
		Usage struct {
			Tokens struct{ In, Out int } `json:"llm_tokens"`
		} `json:"usage"`
	}
	ask := func(q string) (reply, answer) {
		t.Helper()
		r := call(t, "GET", g.URL+"/answer?q="+url.QueryEscape(q), key, "")
		var a answer
		if r.status != 200 || json.Unmarshal([]byte(r.body), &a) != nil {
			t.Fatalf("%s: %d %s", q, r.status, r.body)
		}
		return r, a
	}

	script = func(n int, r llmtest.Request, w http.ResponseWriter) {
		llmtest.CompletionUsage(w, "Magma chambers beneath volcanoes feed their eruptions [1].", 6000, 40)
	}
	r, a := ask("what do magma chambers feed")
	if !a.Answered || a.Answer.Kind != "generated" || a.Answer.Text != "Magma chambers beneath volcanoes feed their eruptions." ||
		len(a.Answer.Sources) != 1 || !strings.HasSuffix(a.Answer.Sources[0].URL, "/volcano") {
		t.Fatalf("generated answer: %s", r.body)
	}
	// The model got the question and the passages, nothing else.
	reqs := model.Requests()
	if len(reqs) != 1 || reqs[0].Body.Model != "small" || reqs[0].Auth != "Bearer test-key" {
		t.Fatalf("model requests: %+v", reqs)
	}
	user := reqs[0].Body.Messages[len(reqs[0].Body.Messages)-1].Content
	if !strings.Contains(user, "what do magma chambers feed") || !strings.Contains(user, "Magma chambers lie beneath") || !strings.Contains(user, site.URL+"/volcano") {
		t.Errorf("prompt: %s", user)
	}
	// Billed: the answer's base price plus 6,000 input and 40 output
	// tokens by the price table.
	want := billing.DefaultPrices().Price(metering.KindAnswer, "", metering.CacheMiss, 6000, 40)
	if got := r.header.Get("X-Svc-Cost"); got != want.String() || want <= billing.DefaultPrices().Price(metering.KindAnswer, "", metering.CacheMiss, 0, 0) {
		t.Errorf("cost %s, want %s", got, want)
	}
	if a.Usage.Tokens.In != 6000 || a.Usage.Tokens.Out != 40 {
		t.Errorf("usage: %+v", a.Usage)
	}

	// The passages do not answer: the model says so; the quote when it
	// is confident, else answered false. Its tokens are billed still.
	script = func(n int, r llmtest.Request, w http.ResponseWriter) { llmtest.CompletionUsage(w, "NO_ANSWER", 300, 2) }
	r, a = ask("glacier ice valleys slide")
	if a.Answered && a.Answer.Kind != "quoted" {
		t.Errorf("no answer from the model: %s", r.body)
	}
	if a.Usage.Tokens.In != 300 {
		t.Errorf("tokens of a model that found no answer: %s", r.body)
	}
	// The model fails: the caller gets the quote or answered false, 200.
	script = func(n int, r llmtest.Request, w http.ResponseWriter) { llmtest.APIError(w, 500, "boom") }
	r, a = ask("what do glaciers carve")
	if r.status != 200 || (a.Answered && a.Answer.Kind != "quoted") {
		t.Errorf("model failed: %d %s", r.status, r.body)
	}
}
