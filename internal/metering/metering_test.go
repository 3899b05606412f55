package metering

import (
	"encoding/json"
	"testing"
)

func TestAppendJSONIsEncodingJSON(t *testing.T) {
	for _, u := range []Usage{
		Hit,
		{Engine: EngineHTTP, Level: LevelLight, Cache: CacheMiss, Units: 1},
		{Engine: EngineBrowser, Level: LevelBrowserProxy, Proxy: "isp", Cache: CacheMiss, Units: 1},
		PerURL(KindBatch, 3),
		PerURL(KindJob, 0),
		{Kind: KindJob, Engine: EngineHTTP, Cache: CacheMiss, Count: Count(2), Job: "j_eu.c1.00ff", Hold: "a1b2"},
		{Kind: KindBatch, Engine: EngineHTTP, Cache: CacheMiss, Count: Count(0), PerLine: true},
		{Kind: KindAnswer, Engine: EngineHTTP, Cache: CacheMiss, InTokens: 1200, OutTokens: 300},
		{Kind: KindExtract, Engine: `we"ird<`, Cache: CacheMiss},
		{Kind: KindMap, Engine: EngineHTTP, Cache: CacheMiss, Units: 4},
		{Kind: KindRecipe, Engine: EngineHTTP, Cache: CacheMiss, Count: Count(4), Boxes: []string{"fetch", "wasm"},
			Lines: []Line{{Call: KindScrape, URL: "https://a.example/", Engine: EngineHTTP, Cache: CacheMiss}, {Call: KindExtract, Step: "fill", InTokens: 10, OutTokens: 2}}},
	} {
		want, err := json.Marshal(u)
		if err != nil {
			t.Fatal(err)
		}
		if got := u.String(); got != string(want) {
			t.Errorf("%+v:\n got %s\nwant %s", u, got, want)
		}
		back, err := Parse(u.String())
		if err != nil {
			t.Fatalf("%s: %v", u.String(), err)
		}
		if again, _ := json.Marshal(back); string(again) != string(want) {
			t.Errorf("round trip of %s gives %s", want, again)
		}
	}
}

// The headers cells sent before this package existed still parse, and the
// ones they send now are those strings.
func TestWireCompatible(t *testing.T) {
	if got := Hit.String(); got != `{"engine":"cache","cache":"hit","units":0}` {
		t.Errorf("hit: %s", got)
	}
	old := map[string]Usage{
		`{"kind":"batch","engine":"http","cache":"miss","count":3}`:                                {Kind: KindBatch, Engine: EngineHTTP, Cache: CacheMiss, Count: Count(3)},
		`{"engine":"browser","level":"browser_proxy","proxy":"isp","cache":"miss","units":1}`:      {Engine: EngineBrowser, Level: LevelBrowserProxy, Proxy: "isp", Cache: CacheMiss, Units: 1},
		`{"kind":"answer","engine":"http","cache":"miss","in_tokens":5,"out_tokens":7,"new":true}`: {Kind: KindAnswer, Engine: EngineHTTP, Cache: CacheMiss, InTokens: 5, OutTokens: 7},
	}
	for raw, want := range old {
		got, err := Parse(raw)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		if string(g) != string(w) {
			t.Errorf("%s: parsed %s, want %s", raw, g, w)
		}
	}
	if _, err := Parse(`{"count":"three"}`); err == nil {
		t.Error("a count that is not a number parsed")
	}
}

func TestEffectiveLevel(t *testing.T) {
	for _, tt := range []struct {
		u    Usage
		want string
	}{
		{Usage{Engine: EngineCache}, LevelLight},
		{Usage{Engine: EngineHTTP}, LevelLight},
		{Usage{Engine: EngineBrowser}, LevelBrowser},
		{Usage{Engine: EngineBrowserProxy}, LevelBrowserProxy},
		{Usage{Engine: EngineBrowser, Level: LevelBrowserProxy}, LevelBrowserProxy},
	} {
		if got := tt.u.EffectiveLevel(); got != tt.want {
			t.Errorf("%+v: %s, want %s", tt.u, got, tt.want)
		}
	}
}

func TestHitAllocatesNothing(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = Hit.String() }); n != 0 {
		t.Errorf("a cache hit's header allocates %v times", n)
	}
	miss := Usage{Engine: EngineHTTP, Level: LevelLight, Cache: CacheMiss, Units: 1}
	if n := testing.AllocsPerRun(100, func() { _ = miss.String() }); n > 1 {
		t.Errorf("a miss's header allocates %v times, want at most the string", n)
	}
}
