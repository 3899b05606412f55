package cell

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/routes"
)

// observe registers the cell's gauges (docs/operations.md, "Metrics"):
// its browser pool (size, pages in use, crashes, driver restarts, fleet-busy
// refusals) and its store's size on disk. Unregistered at Close.
func (c *Cell) observe() (metric.Registration, error) {
	m := otel.Meter("github.com/trawlhq/trawl/cell")
	disk, _ := m.Int64ObservableGauge("trawl.cell.store.disk", metric.WithUnit("By"), metric.WithDescription("the cell's Pebble store on disk"))
	browsers, _ := m.Int64ObservableGauge("trawl.cell.browser.browsers", metric.WithDescription("running Chromium processes of the pool, draining ones included"))
	busy, _ := m.Int64ObservableGauge("trawl.cell.browser.pages_in_use", metric.WithDescription("pages open in the pool now"))
	crashes, _ := m.Int64ObservableCounter("trawl.cell.browser.crashes", metric.WithDescription("browsers that died without being asked to"))
	restarts, _ := m.Int64ObservableCounter("trawl.cell.browser.driver_restarts", metric.WithDescription("restarts of the pool's Playwright driver"))
	fleetBusy, _ := m.Int64ObservableCounter("trawl.cell.browser.fleet_busy", metric.WithDescription("requests refused with 503 fleet-busy"))
	backlogJobs, _ := m.Int64ObservableGauge("trawl.cell.jobs.backlog", metric.WithDescription("released jobs with URLs still to fetch"))
	backlogURLs, _ := m.Int64ObservableGauge("trawl.cell.jobs.backlog_urls", metric.WithDescription("URLs of the cell's jobs still to fetch"))
	jobAge, _ := m.Float64ObservableGauge("trawl.cell.jobs.oldest_age", metric.WithUnit("s"), metric.WithDescription("age of the oldest job with URLs still to fetch; 0 when none"))
	// Job URLs shared across the region's cells (cell/jobs/share.go).
	shQueued, _ := m.Int64ObservableGauge("trawl.cell.jobs.share.queued", metric.WithDescription("this cell's job URLs in the region's queue without an outcome"))
	shFetching, _ := m.Int64ObservableGauge("trawl.cell.jobs.share.fetching", metric.WithDescription("work items this cell's pullers hold now"))
	shBacklog, _ := m.Int64ObservableGauge("trawl.cell.jobs.share.backlog", metric.WithDescription("the region's job URLs waiting for a puller"))
	shLag, _ := m.Int64ObservableGauge("trawl.cell.jobs.share.lag", metric.WithDescription("outcomes of this cell's job URLs not recorded yet"))
	shFetched, _ := m.Int64ObservableCounter("trawl.cell.jobs.share.fetched", metric.WithDescription("job URLs this cell fetched for any cell of the region"))
	shDup, _ := m.Int64ObservableCounter("trawl.cell.jobs.share.duplicates", metric.WithDescription("outcomes dropped: their URL had one already"))
	shRedel, _ := m.Int64ObservableCounter("trawl.cell.jobs.share.redeliveries", metric.WithDescription("work items this cell took after an earlier delivery did not finish"))
	// Monitor checks as work items of the region's queue (cell/checks.go).
	ckQueued, _ := m.Int64ObservableCounter("trawl.cell.monitor.queue.queued", metric.WithDescription("due checks this cell queued as the region's scheduler"))
	ckRan, _ := m.Int64ObservableCounter("trawl.cell.monitor.queue.ran", metric.WithDescription("queued checks this cell ran, for any cell"))
	ckRedel, _ := m.Int64ObservableCounter("trawl.cell.monitor.queue.redeliveries", metric.WithDescription("queued checks this cell took after an earlier delivery did not finish"))
	ckWaiting, _ := m.Int64ObservableGauge("trawl.cell.monitor.queue.waiting", metric.WithDescription("the region's queued checks without a puller, as the scheduler last saw"))
	rcRan, _ := m.Int64ObservableCounter("trawl.cell.recipe.queue.ran", metric.WithDescription("background recipe runs of the region's queue this cell ran, for any cell"))
	rcRedel, _ := m.Int64ObservableCounter("trawl.cell.recipe.queue.redeliveries", metric.WithDescription("queued recipe runs this cell took after an earlier delivery did not finish"))
	rcRunning, _ := m.Int64ObservableGauge("trawl.cell.recipe.queue.running", metric.WithDescription("queued recipe runs this cell runs now"))
	attrs := metric.WithAttributes(attribute.String("trawl.region", c.cfg.Region), attribute.String("trawl.cell", c.cfg.Name))
	work := []metric.Observable{backlogJobs, backlogURLs, jobAge, shQueued, shFetching, shBacklog, shLag, shFetched, shDup, shRedel,
		ckQueued, ckRan, ckRedel, ckWaiting, rcRan, rcRedel, rcRunning}
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		if c.jobs != nil {
			j, u, oldest := c.jobs.Backlog()
			o.ObserveInt64(backlogJobs, int64(j), attrs)
			o.ObserveInt64(backlogURLs, int64(u), attrs)
			age := 0.0
			if !oldest.IsZero() {
				age = max(0, c.cfg.Now().Sub(oldest).Seconds())
			}
			o.ObserveFloat64(jobAge, age, attrs)
			if sh := c.jobs.ShareStats(); sh.Shared {
				o.ObserveInt64(shQueued, int64(sh.Queued), attrs)
				o.ObserveInt64(shFetching, sh.Fetching, attrs)
				o.ObserveInt64(shBacklog, sh.Backlog, attrs)
				o.ObserveInt64(shLag, sh.Lag, attrs)
				o.ObserveInt64(shFetched, sh.Fetched, attrs)
				o.ObserveInt64(shDup, sh.Duplicates, attrs)
				o.ObserveInt64(shRedel, sh.Redelivered, attrs)
			}
		}
		if q := c.CheckQueueStats(); q != nil {
			o.ObserveInt64(ckQueued, q.Queued, attrs)
			o.ObserveInt64(ckRan, q.Ran, attrs)
			o.ObserveInt64(ckRedel, q.Redelivered, attrs)
			o.ObserveInt64(ckWaiting, q.Waiting, attrs)
		}
		if c.recipes != nil {
			if rs := c.recipes.ShareStats(); rs.Shared {
				o.ObserveInt64(rcRan, rs.Ran, attrs)
				o.ObserveInt64(rcRedel, rs.Redelivered, attrs)
				o.ObserveInt64(rcRunning, rs.Running, attrs)
			}
		}
		o.ObserveInt64(disk, int64(c.store.Metrics().DiskBytes), attrs)
		if c.pool != nil {
			st := c.pool.Stats()
			o.ObserveInt64(browsers, int64(st.Browsers), attrs)
			o.ObserveInt64(busy, int64(st.PagesInUse), attrs)
			o.ObserveInt64(crashes, st.Crashes, attrs)
			o.ObserveInt64(restarts, st.DriverRestarts, attrs)
			o.ObserveInt64(fleetBusy, st.FleetBusy, attrs)
		}
		return nil
	}, append([]metric.Observable{disk, browsers, busy, crashes, restarts, fleetBusy}, work...)...)
}

// pages counts the pages the cell answered with, by how (cache hit or
// miss, engine): the cache hit rate is hit / (hit + miss).
var pages, _ = otel.Meter("github.com/trawlhq/trawl/cell").Int64Counter("trawl.cell.pages",
	metric.WithDescription("pages answered, by route, cache outcome (hit, miss, archive) and engine"))

func countPages(ctx context.Context, r *http.Request, header string) {
	u, err := metering.Parse(header)
	if err != nil || u.Cache == "" {
		return
	}
	n := int64(1)
	if u.Count != nil {
		n = int64(*u.Count)
	}
	if n <= 0 {
		return
	}
	pages.Add(ctx, n, metric.WithAttributes(attribute.String("http.route", routes.Default().Match(r).Pattern),
		attribute.String("trawl.cache", u.Cache), attribute.String("trawl.engine", u.Engine)))
}
