package estimate

import (
	"fmt"
	"strings"

	"github.com/trawlhq/trawl/gate/billing"
)

// The text of an estimate: what it costs, what that rests on, what the
// cache changes. Sentences, not a table: the parts are the table.

func (c *calc) part(name string) *Part {
	for i := range c.est.Parts {
		if c.est.Parts[i].Name == name {
			return &c.est.Parts[i]
		}
	}
	return nil
}

func (c *calc) text() string {
	var out []string
	fixed, effort, tokens, changes := c.part("fixed"), c.part("effort"), c.part("tokens"), c.part("changes")
	subject := c.subject()
	n := c.est.Count
	switch {
	case changes != nil:
		often := "once a day"
		if c.changeMost == c.checks && c.checks < int(MonitorPeriod.Hours()/24) {
			often = "on every check"
		}
		out = append(out, fmt.Sprintf("%s costs %s credits over %d days for %s %s; each confirmed change that matched adds %s (up to %s more if it changes %s).",
			subject, fixed.Min, int(MonitorPeriod.Hours()/24), commas(n), plural("check", n),
			c.changeOne, changes.Max, often))
	case tokens != nil:
		var first string
		switch {
		case c.content:
			first = fmt.Sprintf("%s for the call (nothing is fetched)", fixed.Min)
		case effort != nil:
			first = fmt.Sprintf("%s for the fetch %s", fixed.Min+effort.Min, at(c.minLevel()))
			if effort.Max > effort.Min {
				first += fmt.Sprintf(" (up to %s if the page needs %s)", fixed.Max+effort.Max, need(c.maxLevel()))
			}
		case c.kind == billing.KindAnswer:
			first = fmt.Sprintf("%s for the search", fixed.Min)
		default:
			first = fmt.Sprintf("%s for the call", fixed.Min)
		}
		out = append(out, fmt.Sprintf("%s costs %s credits: %s, and %s for model tokens.",
			subject, span(c.est.Min, c.est.Max), first, span(tokens.Min, tokens.Max)))
	case effort != nil:
		s := fmt.Sprintf("%s costs %s credits %s", subject, c.est.Min, at(c.minLevel()))
		if c.est.Max > c.est.Min {
			who := "pages need"
			if n == 1 {
				who = "it needs"
			}
			s += fmt.Sprintf("; up to %s if %s %s", c.est.Max, who, need(c.maxLevel()))
		}
		out = append(out, s+".")
	default:
		s := fmt.Sprintf("%s costs %s credits.", subject, c.est.Min)
		switch c.kind {
		case billing.KindJob:
			s += " Jobs are billed per URL at the light level, whatever a page needs."
		case billing.KindMap:
			s += " A map is always live and costs the same however many sitemaps and pages it reads."
		}
		out = append(out, s)
	}
	if effort != nil {
		out = append(out, seen(effort.Domains)...)
	}
	if c.tokens != nil {
		r := c.tokens
		s := fmt.Sprintf("Model tokens per call: %s to %s in and %s to %s out", commas(r.InMin), commas(r.InMax), commas(r.OutMin), commas(r.OutMax))
		if r.Default {
			s += fmt.Sprintf(", assumed until more %s calls are seen.", c.kind)
		} else {
			s += fmt.Sprintf(", as seen on %s %s calls.", commas(int(r.Calls)), c.kind)
		}
		out = append(out, s)
	}
	if s := c.cacheNote(); s != "" {
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func (c *calc) subject() string {
	n := c.est.Count
	switch c.ep {
	case "scrape", "batch":
		return fmt.Sprintf("Scraping %s %s on %s", commas(n), plural("page", n), c.sitesPhrase())
	case "jobs":
		return fmt.Sprintf("A job of %s %s on %s", commas(n), plural("page", n), c.sitesPhrase())
	case "extract":
		if c.content {
			return "Extracting from your own text"
		}
		return "Extracting from 1 page on " + c.sitesPhrase()
	case "map":
		return "Mapping " + c.sitesPhrase()
	case "search":
		return "A live search"
	case "answer":
		return "An answer"
	case "recipe":
		return fmt.Sprintf("A recipe run of %s %s", commas(n), plural("unit", n))
	case "monitor":
		return fmt.Sprintf("Watching a page on %s every %s", c.sitesPhrase(), c.every)
	}
	return "This call"
}

// sitesPhrase names up to three sites: "a.com", "a.com and b.org",
// "a.com, b.org and c.net", else "12 sites".
func (c *calc) sitesPhrase() string {
	if c.nSites > 3 || len(c.sites) == 0 {
		return commas(c.nSites) + " sites"
	}
	return andList(c.sites)
}

func andList(s []string) string {
	if len(s) == 1 {
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// minLevel and maxLevel are the lowest and highest level of any site.
func (c *calc) minLevel() string {
	best := len(levelOrder) - 1
	for _, d := range c.domains {
		best = min(best, levelIndex(d.MinLevel))
	}
	return levelOrder[best]
}

func (c *calc) maxLevel() string {
	best := 0
	for _, d := range c.domains {
		best = max(best, levelIndex(d.MaxLevel))
	}
	return levelOrder[best]
}

// at says how a page is fetched at a level.
func at(level string) string {
	switch level {
	case billing.LevelBrowser:
		return "with a browser"
	case billing.LevelBrowserProxy:
		return "with a browser through a proxy"
	}
	return "at the light level"
}

// need says what a page needs at a level.
func need(level string) string {
	switch level {
	case billing.LevelBrowser:
		return "a browser"
	case billing.LevelBrowserProxy:
		return "a browser through a proxy"
	}
	return "nothing more than the light level"
}

// span is "1.000" or "1.000 to 10.000".
func span(lo, hi billing.Amount) string {
	if lo == hi {
		return lo.String()
	}
	return lo.String() + " to " + hi.String()
}

// maxSeenSentences bounds the sites the text describes one by one.
const maxSeenSentences = 5

// seen describes what was seen on each site: "Seen on example.com: 10 of
// 12 pages at the light level, 2 with a browser."
func seen(doms []DomainBand) []string {
	var out, unseen []string
	more := 0
	for _, d := range doms {
		total := d.Seen.Total()
		if total == 0 {
			unseen = append(unseen, d.Domain)
			continue
		}
		if len(out) == maxSeenSentences {
			more++
			continue
		}
		var parts []string
		for i, v := range d.Seen.levels() {
			if v == 0 {
				continue
			}
			if len(parts) == 0 {
				parts = append(parts, fmt.Sprintf("%s of %s %s %s", commas(int(v)), commas(int(total)), plural("page", int(total)), at(levelOrder[i])))
			} else {
				parts = append(parts, fmt.Sprintf("%s %s", commas(int(v)), at(levelOrder[i])))
			}
		}
		out = append(out, fmt.Sprintf("Seen on %s: %s.", d.Domain, strings.Join(parts, ", ")))
	}
	if more > 0 {
		out = append(out, fmt.Sprintf("Seen on %d more %s as well (see parts).", more, plural("site", more)))
	}
	if len(unseen) > 0 {
		where := commas(len(unseen)) + " sites"
		if len(unseen) <= 3 {
			where = andList(unseen)
		}
		it := "it"
		if len(unseen) > 1 {
			it = "they"
		}
		out = append(out, fmt.Sprintf("Nothing seen yet on %s, so %s may need anything from the light level to a browser through a proxy.", where, it))
	}
	return out
}

// cacheNote says what the cache would change.
func (c *calc) cacheNote() string {
	cp := c.prices.Calls[c.kind]
	if !cp.Cache {
		return ""
	}
	archive := fmt.Sprintf("%d%% of the price", c.prices.ArchivePercent)
	switch c.prices.ArchivePercent {
	case 50:
		archive = "half"
	case 100:
		archive = "the full price"
	case 0:
		archive = "nothing"
	}
	var s string
	switch c.kind {
	case billing.KindSearch, billing.KindAnswer:
		s = "This assumes a live search: a cached one costs nothing, an archived one " + archive + "."
	case billing.KindRecipe:
		return "A repeat with the same inputs served from the recipe's cache costs nothing; a recipe's cost hint (GET /recipes) says how many units a run takes."
	default:
		if c.content {
			return "Model tokens are never discounted by the cache."
		}
		if c.est.Count == 1 {
			s = "This assumes a live fetch: a cached page costs nothing, an archived one " + archive + "."
		} else {
			s = "This assumes live fetches: a cached page costs nothing, an archived one " + archive + "."
		}
	}
	if cp.Tokens {
		s += " Model tokens are never discounted by the cache."
	}
	return s
}
