package monitor

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawlhq/trawl/cell/llm"
	"github.com/trawlhq/trawl/cell/llm/llmtest"
	"github.com/trawlhq/trawl/cell/monitor/watch"
	"github.com/trawlhq/trawl/internal/httpjson"
)

func modelClient(t *testing.T, srv *llmtest.Server) *llm.Client {
	t.Helper()
	c, err := llm.New(llm.Config{BaseURLs: map[string]string{"test": srv.URL + "/v1"}, RetryBase: 1}, "test/model-1", "k")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// With the operator's model: the model splits the sentence (one call per
// create), and judges the facts of a change (one call per change seen):
// here it says the rule-less condition "the shop gets cheaper" holds,
// which the rules cannot read as a price drop. A model that fails at
// create is the spec's 503 and creates nothing; one that fails to judge
// leaves the rules to it.
func TestModelSplitsAndJudges(t *testing.T) {
	var judgeFails atomic.Bool
	srv := llmtest.NewServer(t, func(n int, r llmtest.Request, w http.ResponseWriter) {
		sys := r.Body.Messages[0].Content
		user := r.Body.Messages[1].Content
		switch {
		case strings.Contains(sys, "Split it into"):
			if strings.Contains(user, "unreadable") {
				llmtest.APIError(w, 500, "model down")
				return
			}
			llmtest.Completion(w, `{"conditions":["the shop gets cheaper","a new product is listed"]}`)
		case strings.Contains(sys, "which of a user's conditions"):
			if judgeFails.Load() {
				llmtest.Completion(w, `{"matched":["c9"]}`) // an id that does not exist
				return
			}
			if !strings.Contains(user, `"after":"45"`) {
				t.Errorf("judge without the facts: %s", user)
			}
			llmtest.Completion(w, `{"matched":["c1"]}`)
		default:
			t.Errorf("unexpected prompt %q", sys)
		}
	})
	model := &Model{Client: modelClient(t, srv)}
	e := newEnv(t, "", func(c *Config) { c.Split, c.Judge = model.Split, model.Judge })
	s := newSite(t, shop("50"))
	v, err := e.svc.Create(ctx0, "acct1", &Request{URL: str(s.URL), Every: str("1h"), Watch: str("Tell me when the shop gets cheaper or lists something new")})
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Conditions.Any) != 2 || v.Conditions.Any[0].Text != "the shop gets cheaper" || v.Conditions.Any[1].ID != "c2" {
		t.Fatalf("conditions %+v", v.Conditions.Any)
	}
	_, err = e.svc.Create(ctx0, "acct1", &Request{URL: str(s.URL + "/b"), Watch: str("unreadable")})
	var me *httpjson.HTTPError
	if !errors.As(err, &me) || me.Status != 503 || me.Message != "could not read the sentence, try again" {
		t.Fatalf("a failing model: %v", err)
	}
	if l, _ := e.svc.List(ctx0, "acct1"); len(l) != 1 {
		t.Fatalf("%d monitors after a refused create", len(l))
	}
	e.advance(time.Second)
	s.set(shop("45"), 200)
	e.advance(time.Hour)
	if evs := e.events(v.ID); len(evs) != 1 || len(evs[0].Matched) != 1 || evs[0].Matched[0] != "c1" {
		t.Fatalf("judged: %+v", evs)
	}
	// The model answers nonsense: the rules judge, the change is kept
	// (seen again in its newer form).
	judgeFails.Store(true)
	s.set(shop("40"), 200)
	e.advance(time.Hour)
	evs := e.events(v.ID)
	if len(evs) != 1 || evs[0].Facts[0].After != "40" {
		t.Fatalf("after the model failed: %+v", evs)
	}
	conds := []watch.Condition{{ID: "c1", Text: "the shop gets cheaper"}, {ID: "c2", Text: "a new product is listed"}}
	if want := watch.Match(conds, evs[0].Facts); !slices.Equal(evs[0].Matched, want) {
		t.Fatalf("matched %v, the rules say %v", evs[0].Matched, want)
	}
}
