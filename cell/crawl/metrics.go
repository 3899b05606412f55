package crawl

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
)

const meterName = "github.com/trawlhq/trawl/cell/crawl"

// refused counts task submissions answered 503 "No available slots".
var refused, _ = otel.Meter(meterName).Int64Counter("trawl.crawl.tasks.refused",
	metric.WithDescription("task submissions refused because the queue was full (503 No available slots)"))

// observe registers the crawl server's queue gauges (docs/operations.md,
// "Metrics"); Close unregisters them.
func (s *Server) observe() (metric.Registration, error) {
	m := otel.Meter(meterName)
	queued, _ := m.Int64ObservableGauge("trawl.crawl.tasks.queued", metric.WithDescription("tasks waiting for a slot"))
	running, _ := m.Int64ObservableGauge("trawl.crawl.tasks.running", metric.WithDescription("tasks running now"))
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		q, r := s.sched.counts()
		o.ObserveInt64(queued, int64(q))
		o.ObserveInt64(running, int64(r))
		return nil
	}, queued, running)
}
