package cell

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
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
	attrs := metric.WithAttributes(attribute.String("trawl.region", c.cfg.Region), attribute.String("trawl.cell", c.cfg.Name))
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
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
	}, disk, browsers, busy, crashes, restarts, fleetBusy)
}
