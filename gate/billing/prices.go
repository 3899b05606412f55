// Package billing is the money-facing side of the ledger: the one price
// table every charge and estimate is computed from, and the billing HTTP API
// (prices, balance, settings, top-ups, checkout completion, the auditors'
// journal stream) with the 402 bodies the gate's meter answers with, and the
// auto-recharge runner. The gate mounts Handlers on the route table's
// billing rows; docs/billing.md has every body shape and decision.
package billing

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/ledger"
)

// Call kinds, effort levels and cache outcomes are the usage contract's
// (internal/metering): the cell reports them, the price table prices them.
const (
	KindScrape        = metering.KindScrape
	KindBatch         = metering.KindBatch
	KindJob           = metering.KindJob
	KindSearch        = metering.KindSearch
	KindAnswer        = metering.KindAnswer
	KindExtract       = metering.KindExtract
	KindRecipe        = metering.KindRecipe
	KindMap           = metering.KindMap
	KindCrawl         = metering.KindCrawl
	KindMonitorCheck  = metering.KindMonitorCheck
	KindMonitorChange = metering.KindMonitorChange

	LevelLight        = metering.LevelLight
	LevelHTTP         = metering.LevelHTTP
	LevelBrowser      = metering.LevelBrowser
	LevelBrowserProxy = metering.LevelBrowserProxy

	CacheMiss    = metering.CacheMiss
	CacheHit     = metering.CacheHit
	CacheArchive = metering.CacheArchive
)

// Kinds lists every call kind a price table must price.
var Kinds = metering.Kinds

// Levels lists the effort levels a price table must have.
var Levels = metering.Levels

// Prices is the price table: the one source for metering, estimates and GET
// /v1/prices. The JSON form is both the config file and the public body;
// credit amounts are decimal strings with three places ("1.000").
type Prices struct {
	// Calls is the base price of each call kind (a plain page, fetched
	// live at the light level) and how it is adjusted.
	Calls map[string]CallPrice `json:"calls"`
	// Effort multiplies the base price of kinds with effort set, per
	// level; light is the plain page.
	Effort map[string]Factor `json:"effort"`
	// ArchivePercent is what a line served from the archive costs, as a
	// percentage of the live price (50: half).
	ArchivePercent int `json:"archive_percent"`
	// Tokens prices language-model tokens, added to kinds with tokens set.
	Tokens TokenPrices `json:"tokens"`
	// Grants are the free credits.
	Grants Grants `json:"grants"`
	// Packs are what a top-up can buy, in increasing price.
	Packs []Pack `json:"packs"`
	// Plans are the limits per plan (ledger.PlanFree, ledger.PlanSupporter).
	Plans map[string]PlanLimits `json:"plans"`
	// Note is shown with the public table.
	Note string `json:"note,omitempty"`
}

// CallPrice prices one call kind.
type CallPrice struct {
	// Base is the price of one Per at the light level, live.
	Base Amount `json:"base"`
	// Per names what Base buys: call, url, unit, check, change.
	Per string `json:"per"`
	// Effort: the level's multiplier applies.
	Effort bool `json:"effort"`
	// Cache: a cache hit costs nothing and an archive hit ArchivePercent.
	Cache bool `json:"cache"`
	// Tokens: model tokens are added to the price.
	Tokens bool `json:"tokens"`
}

// TokenPrices are the prices of a block of model tokens; a partial block
// costs a whole one, input and output counted separately.
type TokenPrices struct {
	Per    int    `json:"per"`    // tokens in a block (5000)
	Input  Amount `json:"input"`  // per block of input tokens
	Output Amount `json:"output"` // per block of output tokens
}

// Grants are the free credits (docs/spec/hosted-api.md §8.4).
type Grants struct {
	// Signup is granted when an e-mail address is verified; it never
	// expires.
	Signup Amount `json:"signup"`
	// Monthly is granted on the 1st per plan, spent first, and lapses at
	// the end of the month.
	Monthly map[string]Amount `json:"monthly"`
	// Pass comes with an instant pass key and lapses after Days.
	Pass PassGrant `json:"pass"`
}

// PassGrant is the credit of a pass.
type PassGrant struct {
	Credits Amount `json:"credits"`
	Days    int    `json:"days"`
}

// Pack is a top-up: USD whole dollars buy Credits (never expiring).
type Pack struct {
	USD     int    `json:"usd"`
	Credits Amount `json:"credits"`
}

// PlanLimits are a plan's limits; 0 means no limit.
type PlanLimits struct {
	RatePerMinute int `json:"rate_per_minute"`
	Concurrency   int `json:"concurrency"`
	Keys          int `json:"keys"`
	// MonthlyCap is the spend cap a new account of the plan starts with
	// ("0.000": none); the account may change it.
	MonthlyCap Amount `json:"monthly_cap"`
}

// DefaultPrices is the launch table (docs/billing.md explains the values).
// One credit is a plain page; the $5 pack makes a credit half a US cent.
func DefaultPrices() *Prices {
	return &Prices{
		Calls: map[string]CallPrice{
			KindScrape:        {Base: credits(1), Per: "call", Effort: true, Cache: true},
			KindBatch:         {Base: credits(1), Per: "url", Effort: true, Cache: true},
			KindJob:           {Base: credits(1), Per: "url", Cache: true},
			KindSearch:        {Base: credits(2), Per: "call", Cache: true},
			KindAnswer:        {Base: credits(2), Per: "call", Cache: true, Tokens: true},
			KindExtract:       {Base: credits(1), Per: "call", Effort: true, Cache: true, Tokens: true},
			KindRecipe:        {Base: credits(1), Per: "unit", Cache: true, Tokens: true},
			KindMap:           {Base: credits(2), Per: "call"}, // whatever it reads, always live (docs/billing.md)
			KindCrawl:         {Base: credits(1), Per: "page", Effort: true, Cache: true},
			KindMonitorCheck:  {Base: credits(1), Per: "check"},
			KindMonitorChange: {Base: credits(3), Per: "change"},
		},
		Effort: map[string]Factor{
			LevelLight:        factor(1),
			LevelBrowser:      factor(5),
			LevelBrowserProxy: factor(10),
		},
		ArchivePercent: 50,
		Tokens:         TokenPrices{Per: 5000, Input: Amount(500), Output: credits(2)},
		Grants: Grants{
			Signup: credits(100),
			Monthly: map[string]Amount{
				ledger.PlanFree:      credits(100),
				ledger.PlanSupporter: credits(200),
			},
			Pass: PassGrant{Credits: credits(25), Days: 7},
		},
		Packs: []Pack{
			{USD: 5, Credits: credits(1000)},
			{USD: 10, Credits: credits(2200)},
			{USD: 25, Credits: credits(6000)},
			{USD: 50, Credits: credits(13000)},
		},
		Plans: map[string]PlanLimits{
			ledger.PlanFree:      {RatePerMinute: 20, Concurrency: 2, Keys: 2, MonthlyCap: credits(200)},
			ledger.PlanSupporter: {RatePerMinute: 120, Concurrency: 10, Keys: 10},
		},
		Note: "Launch pricing for the first year: discounted and subject to change; credit already bought keeps its value.",
	}
}

func credits(n int64) Amount { return Amount(ledger.Credits(n)) }
func factor(n int64) Factor  { return Factor(n * 1000) }

// LoadPrices reads a price table from a JSON file (the shape of GET
// /v1/prices). The file is laid over DefaultPrices: a key it leaves out
// keeps its default, a map entry or the packs list it gives replaces the
// default one. Unknown fields are an error.
func LoadPrices(path string) (*Prices, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load prices: %w", err)
	}
	defer f.Close()
	p, err := ParsePrices(f)
	if err != nil {
		return nil, fmt.Errorf("load prices %q: %w", path, err)
	}
	return p, nil
}

// ParsePrices is LoadPrices from a reader.
func ParsePrices(r io.Reader) (*Prices, error) {
	p := DefaultPrices()
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(p); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("data after the price table")
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// Validate checks that the table prices every kind and level, that packs
// are sorted and priced, and that both plans exist.
func (p *Prices) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	known := map[string]bool{}
	for _, k := range Kinds {
		known[k] = true
		c, ok := p.Calls[k]
		if !ok {
			bad("calls: no price for %q", k)
		} else if c.Per == "" {
			bad("calls.%s: per is empty", k)
		}
	}
	for k := range p.Calls {
		if !known[k] {
			bad("calls: unknown kind %q", k)
		}
	}
	for _, l := range Levels {
		if f, ok := p.Effort[l]; !ok || f <= 0 {
			bad("effort: level %q needs a positive multiplier", l)
		}
	}
	if p.ArchivePercent < 0 || p.ArchivePercent > 100 {
		bad("archive_percent %d: want 0 to 100", p.ArchivePercent)
	}
	if p.Tokens.Per <= 0 {
		bad("tokens.per must be positive")
	}
	if len(p.Packs) == 0 {
		bad("packs: at least one pack")
	}
	for i, pk := range p.Packs {
		if pk.USD <= 0 || pk.Credits <= 0 {
			bad("packs[%d]: usd and credits must be positive", i)
		}
		if i > 0 && pk.USD <= p.Packs[i-1].USD {
			bad("packs[%d]: usd %d not above the pack before", i, pk.USD)
		}
	}
	for _, plan := range []string{ledger.PlanFree, ledger.PlanSupporter} {
		if _, ok := p.Plans[plan]; !ok {
			bad("plans: no %q plan", plan)
		}
	}
	for plan, l := range p.Plans {
		if l.RatePerMinute < 0 || l.Concurrency < 0 || l.Keys < 0 {
			bad("plans.%s: limits must not be negative", plan)
		}
	}
	for plan := range p.Grants.Monthly {
		if _, ok := p.Plans[plan]; !ok {
			bad("grants.monthly: unknown plan %q", plan)
		}
	}
	if p.Grants.Pass.Days < 0 {
		bad("grants.pass.days must not be negative")
	}
	return errors.Join(errs...)
}

// Pack returns the pack that costs usd dollars.
func (p *Prices) Pack(usd int) (Pack, bool) {
	for _, pk := range p.Packs {
		if pk.USD == usd {
			return pk, true
		}
	}
	return Pack{}, false
}

// PackList is the packs' prices for messages: "5, 10, 25, 50".
func (p *Prices) PackList() string {
	s := make([]string, len(p.Packs))
	for i, pk := range p.Packs {
		s[i] = strconv.Itoa(pk.USD)
	}
	return strings.Join(s, ", ")
}

// MonthlyCredits is the monthly grant per plan, as ledger.ResetMonth wants
// it.
func (p *Prices) MonthlyCredits() map[string]ledger.MC {
	out := make(map[string]ledger.MC, len(p.Grants.Monthly))
	for plan, a := range p.Grants.Monthly {
		out[plan] = a.MC()
	}
	return out
}

// Usage is one usage line to price (docs/spec/hosted-api.md §2.8).
type Usage struct {
	Kind  string // a Kind constant
	Level string // an effort level; "" and "http" are light
	Cache string // hit, miss, archive; "" is a miss
	// Count is how many of the kind's Per the line covers (URLs, recipe
	// units); 0 counts as 1.
	Count     int
	InTokens  int
	OutTokens int
}

// Errors of Quote.
var (
	ErrUnknownKind  = errors.New("unknown call kind")
	ErrUnknownLevel = errors.New("unknown effort level")
	ErrUnknownCache = errors.New("unknown cache outcome")
)

// Price prices one unit of a call kind: the base price, times the effort
// multiplier (kinds with effort), free on a cache hit and ArchivePercent of
// it on an archive hit (kinds with cache), plus model tokens (kinds with
// tokens; a partial block of Tokens.Per costs a whole one, and tokens are
// never discounted by the cache). Every step rounds up to a millicredit. An
// unknown kind, level or cache outcome prices 0: callers that take these
// from outside check them with Quote.
func (p *Prices) Price(kind, level, cache string, inTokens, outTokens int) ledger.MC {
	v, err := p.Quote(Usage{Kind: kind, Level: level, Cache: cache, InTokens: inTokens, OutTokens: outTokens})
	if err != nil {
		return 0
	}
	return v
}

// Quote prices a usage line: Count times Price, tokens once.
func (p *Prices) Quote(u Usage) (ledger.MC, error) {
	c, ok := p.Calls[u.Kind]
	if !ok {
		return 0, fmt.Errorf("%w %q", ErrUnknownKind, u.Kind)
	}
	level := u.Level
	if level == "" || level == LevelHTTP {
		level = LevelLight
	}
	f, ok := p.Effort[level]
	if !ok {
		return 0, fmt.Errorf("%w %q", ErrUnknownLevel, u.Level)
	}
	switch u.Cache {
	case "", CacheMiss, CacheHit, CacheArchive:
	default:
		return 0, fmt.Errorf("%w %q", ErrUnknownCache, u.Cache)
	}
	if u.InTokens < 0 || u.OutTokens < 0 || u.Count < 0 {
		return 0, errors.New("negative tokens or count")
	}
	unit := int64(c.Base)
	if c.Effort {
		unit = ceilDiv(unit*int64(f), 1000)
	}
	if c.Cache {
		switch u.Cache {
		case CacheHit:
			unit = 0
		case CacheArchive:
			unit = ceilDiv(unit*int64(p.ArchivePercent), 100)
		}
	}
	total := unit * int64(max(u.Count, 1))
	if c.Tokens {
		per := int64(p.Tokens.Per)
		total += ceilDiv(int64(u.InTokens), per) * int64(p.Tokens.Input)
		total += ceilDiv(int64(u.OutTokens), per) * int64(p.Tokens.Output)
	}
	return ledger.MC(total), nil
}

func ceilDiv(a, b int64) int64 {
	if a <= 0 {
		return 0
	}
	return (a + b - 1) / b
}

// Amount is a credit amount in the price table, written in JSON as a
// decimal string with three places ("12.345"). Reading accepts at most
// three decimals and refuses negative amounts and JSON numbers.
type Amount ledger.MC

// MC is the amount in millicredits.
func (a Amount) MC() ledger.MC { return ledger.MC(a) }

// String is "12.345".
func (a Amount) String() string { return ledger.MC(a).String() }

// MarshalJSON implements json.Marshaler.
func (a Amount) MarshalJSON() ([]byte, error) { return strconv.AppendQuote(nil, a.String()), nil }

// UnmarshalJSON implements json.Unmarshaler.
func (a *Amount) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("credit amount %s: want a decimal string like \"1.000\"", b)
	}
	v, err := ledger.ParseMC(s)
	if err != nil {
		return err
	}
	if v < 0 {
		return fmt.Errorf("credit amount %q is negative", s)
	}
	*a = Amount(v)
	return nil
}

// Factor is a multiplier with three decimals, kept in thousandths, written
// in JSON as a number (5, 2.5).
type Factor int64

// MarshalJSON implements json.Marshaler.
func (f Factor) MarshalJSON() ([]byte, error) {
	s := ledger.MC(f).String()
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return []byte(s), nil
}

// UnmarshalJSON implements json.Unmarshaler: a non-negative JSON number with
// at most three decimals, read exactly (no floating point).
func (f *Factor) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] < '0' || b[0] > '9' {
		return fmt.Errorf("multiplier %s: want a non-negative number", b)
	}
	v, err := ledger.ParseMC(string(b))
	if err != nil {
		return fmt.Errorf("multiplier %s: want at most three decimals", b)
	}
	*f = Factor(v)
	return nil
}
