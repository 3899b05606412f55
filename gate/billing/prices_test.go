package billing

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trawlhq/trawl/ledger"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

func TestPrice(t *testing.T) {
	p := DefaultPrices()
	tests := []struct {
		kind, level, cache string
		in, out            int
		want               string
	}{
		{KindScrape, LevelLight, CacheMiss, 0, 0, "1.000"},
		{KindScrape, LevelHTTP, "", 0, 0, "1.000"},
		{KindScrape, "", "", 0, 0, "1.000"},
		{KindScrape, LevelBrowser, CacheMiss, 0, 0, "5.000"},
		{KindScrape, LevelBrowserProxy, CacheMiss, 0, 0, "10.000"},
		{KindScrape, LevelLight, CacheArchive, 0, 0, "0.500"},
		{KindScrape, LevelBrowser, CacheArchive, 0, 0, "2.500"},
		{KindScrape, LevelBrowserProxy, CacheHit, 0, 0, "0.000"},
		{KindScrape, LevelLight, CacheMiss, 9000, 9000, "1.000"}, // scrape runs no model
		{KindBatch, LevelBrowser, CacheMiss, 0, 0, "5.000"},
		{KindBatch, LevelLight, CacheHit, 0, 0, "0.000"},
		{KindJob, LevelBrowserProxy, CacheMiss, 0, 0, "1.000"}, // jobs bill at the light level
		{KindJob, LevelLight, CacheArchive, 0, 0, "0.500"},
		{KindSearch, "", CacheMiss, 0, 0, "2.000"},
		{KindSearch, "", CacheArchive, 0, 0, "1.000"},
		{KindAnswer, "", CacheMiss, 1, 1, "4.500"},
		{KindAnswer, "", CacheArchive, 5000, 5001, "5.500"}, // tokens are never halved
		{KindAnswer, "", CacheMiss, 0, 0, "2.000"},
		{KindExtract, LevelBrowser, CacheMiss, 12000, 0, "6.500"},
		{KindExtract, LevelLight, CacheHit, 100, 100, "2.500"}, // a cached page, a live model
		{KindExtract, LevelLight, CacheMiss, 5000, 10000, "5.500"},
		{KindRecipe, "", CacheMiss, 0, 0, "1.000"},
		{KindRecipe, "", CacheHit, 0, 0, "0.000"},
		{KindMap, "", CacheMiss, 0, 0, "2.000"},
		{KindMap, LevelBrowserProxy, CacheHit, 9000, 9000, "2.000"}, // always live over HTTP: no effort, cache or tokens
		{KindMonitorCheck, LevelBrowser, CacheMiss, 0, 0, "1.000"},
		{KindMonitorCheck, "", CacheArchive, 0, 0, "1.000"}, // cache does not apply
		{KindMonitorChange, "", "", 0, 0, "3.000"},
		{"spider", "", "", 0, 0, "0.000"},               // unknown kind: Quote says why
		{KindScrape, "rocket", "", 0, 0, "0.000"},       // unknown level
		{KindScrape, LevelLight, "warm", 0, 0, "0.000"}, // unknown cache
	}
	for _, tt := range tests {
		got := p.Price(tt.kind, tt.level, tt.cache, tt.in, tt.out).String()
		if got != tt.want {
			t.Errorf("Price(%q, %q, %q, %d, %d) = %s, want %s", tt.kind, tt.level, tt.cache, tt.in, tt.out, got, tt.want)
		}
	}
}

func TestQuote(t *testing.T) {
	p := DefaultPrices()
	if v, err := p.Quote(Usage{Kind: KindBatch, Level: LevelBrowser, Count: 3}); err != nil || v != ledger.Credits(15) {
		t.Errorf("3 browser URLs: %s %v", v, err)
	}
	if v, err := p.Quote(Usage{Kind: KindRecipe, Count: 4, Cache: CacheMiss}); err != nil || v != ledger.Credits(4) {
		t.Errorf("4 recipe units: %s %v", v, err)
	}
	for _, tt := range []struct {
		u    Usage
		want error
	}{
		{Usage{Kind: "spider"}, ErrUnknownKind},
		{Usage{Kind: KindScrape, Level: "rocket"}, ErrUnknownLevel},
		{Usage{Kind: KindScrape, Cache: "warm"}, ErrUnknownCache},
	} {
		if _, err := p.Quote(tt.u); !errors.Is(err, tt.want) {
			t.Errorf("Quote(%+v): %v, want %v", tt.u, err, tt.want)
		}
	}
	if _, err := p.Quote(Usage{Kind: KindAnswer, InTokens: -1}); err == nil {
		t.Error("negative tokens priced")
	}
}

func TestPriceRoundsUp(t *testing.T) {
	p := DefaultPrices()
	p.Calls[KindScrape] = CallPrice{Base: 3, Per: "call", Effort: true, Cache: true}
	p.Effort[LevelBrowser] = 2500 // 2.5x

	if got := p.Price(KindScrape, LevelBrowser, CacheMiss, 0, 0); got != 8 { // 7.5 mc
		t.Errorf("3 mc x 2.5 = %d mc, want 8", got)
	}
	if got := p.Price(KindScrape, LevelLight, CacheArchive, 0, 0); got != 2 { // 1.5 mc
		t.Errorf("half of 3 mc = %d mc, want 2", got)
	}
}

func TestDefaultPrices(t *testing.T) {
	p := DefaultPrices()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(p.Packs); i++ {
		prev, cur := p.Packs[i-1], p.Packs[i]
		if int64(cur.Credits)*int64(prev.USD) <= int64(prev.Credits)*int64(cur.USD) {
			t.Errorf("$%d buys no more credits per dollar than $%d", cur.USD, prev.USD)
		}
	}
	sup := p.Plans[ledger.PlanSupporter]
	if sup != (PlanLimits{RatePerMinute: 120, Concurrency: 10, Keys: 10}) {
		t.Errorf("supporter limits %+v, docs/spec/hosted-api.md §8 says 120/min, 10 at a time, 10 keys, no cap", sup)
	}
	if p.Calls[KindMonitorCheck].Base.MC() != ledger.Credits(1) || p.Calls[KindMonitorChange].Base.MC() != ledger.Credits(3) {
		t.Error("docs/spec/hosted-api.md §8.3: a monitor check is 1 credit, a matched change 3")
	}
	if p.ArchivePercent != 50 || p.Tokens.Per != 5000 {
		t.Error("docs/spec/hosted-api.md §8: archive half, tokens per 5,000")
	}
	if m := p.MonthlyCredits(); m[ledger.PlanFree] != ledger.Credits(100) {
		t.Errorf("monthly credits %v", m)
	}
}

// The public body is the config format: the golden file is both.
func TestPricesGolden(t *testing.T) {
	got, err := json.MarshalIndent(DefaultPrices(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden := filepath.Join("testdata", "prices.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("DefaultPrices JSON differs from %s (go test -update rewrites it):\n%s", golden, got)
	}
	p, err := LoadPrices(golden)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := json.MarshalIndent(p, "", "  ")
	if !bytes.Equal(append(again, '\n'), want) {
		t.Fatal("loading the golden table does not give it back")
	}
}

func TestParsePrices(t *testing.T) {
	p, err := ParsePrices(strings.NewReader(`{"packs":[{"usd":20,"credits":"5000"}],"effort":{"browser":2.5},"calls":{"search":{"base":"1.5","per":"call","cache":true}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Packs) != 1 || p.Packs[0].Credits.MC() != ledger.Credits(5000) {
		t.Errorf("packs %+v", p.Packs)
	}
	if p.Effort[LevelBrowser] != 2500 || p.Effort[LevelBrowserProxy] != 10000 {
		t.Errorf("effort %v: browser replaced, the rest kept", p.Effort)
	}
	if got := p.Price(KindSearch, "", CacheArchive, 0, 0).String(); got != "0.750" {
		t.Errorf("search archive %s", got)
	}
	if p.Calls[KindScrape].Base.MC() != ledger.Credits(1) {
		t.Error("scrape default lost")
	}
	// A table written before a kind existed (this one names no map) gets
	// the kind's default, so an upgraded gate still prices every kind.
	if p.Calls[KindMap] != DefaultPrices().Calls[KindMap] {
		t.Errorf("map default lost: %+v", p.Calls[KindMap])
	}
	bad := []struct{ name, in string }{
		{"unknown field", `{"packz":[]}`},
		{"amount as a number", `{"grants":{"signup":100}}`},
		{"four decimals", `{"grants":{"signup":"1.0001"}}`},
		{"negative amount", `{"grants":{"signup":"-1"}}`},
		{"multiplier as a string", `{"effort":{"browser":"5"}}`},
		{"negative multiplier", `{"effort":{"browser":-5}}`},
		{"multiplier with exponent", `{"effort":{"browser":5e0}}`},
		{"zero multiplier", `{"effort":{"browser":0}}`},
		{"unsorted packs", `{"packs":[{"usd":10,"credits":"1"},{"usd":5,"credits":"1"}]}`},
		{"no packs", `{"packs":[]}`},
		{"free pack", `{"packs":[{"usd":5,"credits":"0"}]}`},
		{"unknown kind", `{"calls":{"spider":{"base":"1","per":"call"}}}`},
		{"archive over 100", `{"archive_percent":150}`},
		{"no token block", `{"tokens":{"per":0,"input":"1","output":"1"}}`},
		{"monthly for an unknown plan", `{"grants":{"monthly":{"gold":"1"}}}`},
		{"two objects", `{} {}`},
		{"not json", `prices`},
	}
	for _, tt := range bad {
		if _, err := ParsePrices(strings.NewReader(tt.in)); err == nil {
			t.Errorf("%s: accepted %s", tt.name, tt.in)
		}
	}
	if _, err := LoadPrices(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("missing file loaded")
	}
}
