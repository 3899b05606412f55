package store

// Every key in a trawl store starts with one of the prefixes below, and
// the package named beside it is the only one that reads or writes that
// range. A process opens several stores (one directory each); a prefix
// needs to be unique within its store only, but the prefixes are chosen
// unique across all of them so a key read in a dump names its owner.
// TestPrefixesDoNotOverlap fails when one prefix of a store begins
// another. To add a range: a constant here, a row in Stores, and build
// the package's keys from the constant.

// The ledger's replicated state (<gate data>/ledger/state).
const (
	// PrefixLedger holds the FSM's state: accounts, keys, balances,
	// holds, receipts, commands, payments, peers, journal (ledger/state.go).
	PrefixLedger = "L/"
)

// The gate's own store (<gate data>/holds).
const (
	// PrefixHolds is the region's charge journal and hold balances
	// (ledger.HoldsClient).
	PrefixHolds = "H/"
	// PrefixUsage is the region's receipt lines (gate/usage).
	PrefixUsage = "U/"
	// PrefixEstimate is the observed effort per site and tokens per call
	// kind (gate/estimate).
	PrefixEstimate = "E/"
	// PrefixCells is every cell name the region has had (gate: routing
	// of object ids to a cell that is down, or never was).
	PrefixCells = "M/"
	// PrefixPayments is the Local payment provider's checkout sessions
	// (gate/payments).
	PrefixPayments = "P/"
	// PrefixReleases is the held jobs and retries the meter charged and
	// has not yet released at their cell (gate, caddy-modules/meter).
	PrefixReleases = "R/"
	// PrefixMonitorCharges marks the monitor charges the gate has
	// collected from its cells, so each is charged once (gate).
	PrefixMonitorCharges = "MC/"
	// PrefixIssues is the problems customers reported to the operators
	// (gate/issues).
	PrefixIssues = "IS/"
	// PrefixDrained marks the cells an operator drained: no new work is
	// sent to them (gate/operator.go).
	PrefixDrained = "MD/"
)

// The cell's store (<cell data>/store).
const (
	// PrefixCache is the page cache (cell/scrape).
	PrefixCache = "c/"
	// PrefixArchive is the last version of each page (cell/scrape).
	PrefixArchive = "a/"
	// PrefixPageCopy is the last version of each page another cell of
	// the region archived and sent this one to index beside it (cell,
	// pages.go): the archive record, received time as its fetch time.
	PrefixPageCopy = "pc/"
	// PrefixPageCopyOwed holds the fetch time from which this cell's
	// pages may still owe their copy to another cell (cell, pages.go).
	PrefixPageCopyOwed = "pco/"
	// PrefixJob is a job's meta, URLs, pending set and results (cell/jobs).
	PrefixJob = "j/"
	// PrefixJobIndex lists the jobs, for start-up (cell/jobs).
	PrefixJobIndex = "ji/"
	// PrefixJobKey maps an account's idempotency key to the job it
	// submitted (cell/jobs).
	PrefixJobKey = "jk/"
	// PrefixSite is the engine ladder's memory per site (cell/fetch/ladder).
	PrefixSite = "site/"
	// PrefixMonitor is the region's monitors: records, indexes, versions,
	// timeline events, mails and the charges not yet collected. Kept in
	// the region gate's store (internal/monstore); in a cell's own store
	// only for a cell without a gate (cell/monitor).
	PrefixMonitor = "mon/"
	// PrefixMonitorHook is the monitors' pending webhook deliveries
	// (internal/webhook), in the same store as PrefixMonitor.
	PrefixMonitorHook = "monhook/"
	// PrefixRecipeCache is the recipes' cached results, by recipe,
	// version and inputs; never a run with a secret input (cell/recipe).
	PrefixRecipeCache = "rc/"
	// PrefixRecipeHealth is the recipes' health checks and stages
	// (cell/recipe).
	PrefixRecipeHealth = "rh/"
	// PrefixRecipeJob is the recipes' background runs (run: job), their
	// status and rows; never their inputs (cell/recipe).
	PrefixRecipeJob = "rj/"
	// PrefixRecipeCharge is the finished jobs' charges waiting for the
	// gate (cell/recipe).
	PrefixRecipeCharge = "rjc/"
	// PrefixFirecrawlCharge is the crawls' page charges waiting for the
	// gate (cell/v2_crawl.go), PrefixFirecrawlCredits the credits the
	// gate charged for each crawl.
	PrefixFirecrawlCharge  = "fcc/"
	PrefixFirecrawlCredits = "fcu/"
	// PrefixFirecrawlHook is the pending webhook deliveries of Firecrawl's
	// batch scrapes and crawls (internal/webhook, for cell/fchook),
	// PrefixFirecrawlHookDue their index by the time each is due.
	PrefixFirecrawlHook    = "fch/"
	PrefixFirecrawlHookDue = "fchd/"
)

// The crawl server's store (<data>/crawl).
const (
	// PrefixCrawlTask is a crawl task and its results (cell/crawl).
	PrefixCrawlTask = "crawltask/"
	// PrefixCrawlExpiry indexes finished tasks by expiry (cell/crawl).
	PrefixCrawlExpiry = "crawlexp/"
	// PrefixCrawlWebhook holds the pending webhook deliveries of finished
	// tasks (internal/webhook, for cell/crawl).
	PrefixCrawlWebhook = "crawlhook/"
	// PrefixCrawlPage is the crawl server's page cache: pages fetched
	// without a browser, by URL and headers (cell/crawl).
	PrefixCrawlPage = "crawlpage/"
	// PrefixCrawlSite is the crawl server's engine ladder memory per site
	// (cell/fetch/ladder, Config.MemoryPrefix).
	PrefixCrawlSite = "crawlsite/"
)

// The operator's index crawler (<data>/frontier, trawl index crawl).
const (
	// PrefixFrontier is the crawler's queue of URLs to fetch, in order
	// (internal/crawler).
	PrefixFrontier = "fq/"
	// PrefixFrontierSeen is every URL the crawler has queued (internal/crawler).
	PrefixFrontierSeen = "fs/"
	// PrefixFrontierVisit is each fetched URL's revisit record: its
	// content hash, how often it changed, and when it is due again
	// (internal/crawler).
	PrefixFrontierVisit = "fv/"
)

// Range is one key range of a store and the package that owns it.
type Range struct {
	Prefix string
	Owner  string
}

// Layout is one kind of store and its ranges.
type Layout struct {
	Store  string // the directory, relative to the process's data dir
	Ranges []Range
}

// Stores is every kind of store trawl opens and the ranges in each.
var Stores = []Layout{
	{Store: "ledger/state", Ranges: []Range{
		{PrefixLedger, "ledger"},
	}},
	{Store: "holds", Ranges: []Range{
		{PrefixHolds, "ledger (Client)"},
		{PrefixUsage, "gate/usage"},
		{PrefixEstimate, "gate/estimate"},
		{PrefixCells, "gate"},
		{PrefixPayments, "gate/payments"},
		{PrefixReleases, "gate"},
		{PrefixMonitorCharges, "gate"},
		{PrefixIssues, "gate/issues"},
		{PrefixDrained, "gate"},
	}},
	{Store: "store", Ranges: []Range{
		{PrefixCache, "cell/scrape"},
		{PrefixArchive, "cell/scrape"},
		{PrefixPageCopy, "cell (pages.go)"},
		{PrefixPageCopyOwed, "cell (pages.go)"},
		{PrefixJob, "cell/jobs"},
		{PrefixJobIndex, "cell/jobs"},
		{PrefixJobKey, "cell/jobs"},
		{PrefixSite, "cell/fetch/ladder"},
		{PrefixMonitor, "cell/monitor"},
		{PrefixMonitorHook, "internal/webhook"},
		{PrefixRecipeCache, "cell/recipe"},
		{PrefixRecipeHealth, "cell/recipe"},
		{PrefixRecipeJob, "cell/recipe"},
		{PrefixRecipeCharge, "cell/recipe"},
		{PrefixFirecrawlCharge, "cell (v2 crawl)"},
		{PrefixFirecrawlCredits, "cell (v2 crawl)"},
		{PrefixFirecrawlHook, "internal/webhook"},
		{PrefixFirecrawlHookDue, "internal/webhook"},
	}},
	{Store: "crawl", Ranges: []Range{
		{PrefixCrawlTask, "cell/crawl"},
		{PrefixCrawlExpiry, "cell/crawl"},
		{PrefixCrawlWebhook, "internal/webhook"},
		{PrefixCrawlPage, "cell/crawl"},
		{PrefixCrawlSite, "cell/fetch/ladder"},
	}},
	{Store: "frontier", Ranges: []Range{
		{PrefixFrontier, "internal/crawler"},
		{PrefixFrontierSeen, "internal/crawler"},
		{PrefixFrontierVisit, "internal/crawler"},
	}},
}
