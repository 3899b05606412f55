package gate

import (
	"context"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/trawlhq/trawl/ledger"
)

// The gate's metrics (docs/operations.md, "Metrics"): what an SRE pages
// on. Instruments come from the global meter provider (internal/telemetry:
// a Prometheus endpoint on an operator port, OTLP when asked); without one
// they cost nothing.

// GateMetrics are the gate's request-path instruments.
type GateMetrics struct {
	requests metric.Int64Counter
	duration metric.Float64Histogram
	charged  metric.Int64Counter
}

var (
	gateMetricsOnce sync.Once
	gateMetrics     *GateMetrics
)

const meterName = "github.com/trawlhq/trawl/gate"

// Metrics returns the gate's instruments.
func Metrics() *GateMetrics {
	gateMetricsOnce.Do(func() {
		m := otel.Meter(meterName)
		g := &GateMetrics{}
		g.requests, _ = m.Int64Counter("trawl.gate.requests",
			metric.WithDescription("requests answered by the gate, by route and status (refusals are the 4xx and 5xx)"))
		g.duration, _ = m.Float64Histogram("trawl.gate.request.duration", metric.WithUnit("s"),
			metric.WithDescription("time from the request to the answer's end, by route"),
			metric.WithExplicitBucketBoundaries(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 90))
		g.charged, _ = m.Int64Counter("trawl.gate.credits.charged", metric.WithUnit("{millicredit}"),
			metric.WithDescription("credits charged, in millicredits, by call kind and effort level"))
		gateMetrics = g
	})
	return gateMetrics
}

// Request counts one answered request.
func (g *GateMetrics) Request(ctx context.Context, method, route string, status int, took time.Duration) {
	attrs := metric.WithAttributes(attribute.String("http.request.method", method), attribute.String("http.route", route),
		attribute.String("http.response.status_code", strconv.Itoa(status)))
	g.requests.Add(ctx, 1, attrs)
	g.duration.Record(ctx, took.Seconds(), metric.WithAttributes(attribute.String("http.route", route)))
}

// Charged counts a charge.
func (g *GateMetrics) Charged(ctx context.Context, kind, level string, mc ledger.MC) {
	if v := int64(mc); v > 0 {
		g.charged.Add(ctx, v, metric.WithAttributes(attribute.String("trawl.kind", kind), attribute.String("trawl.level", level)))
	}
}

// observe registers the runtime's gauges: the ledger voter (leader, commit
// lag), the holds client (unsettled and parked charges) and the region's
// live cells. Unregistered at Close.
func (rt *Runtime) observe() (metric.Registration, error) {
	m := otel.Meter(meterName)
	leader, _ := m.Int64ObservableGauge("trawl.ledger.raft.leader", metric.WithDescription("1 on the region's voter while it leads the ledger"))
	applied, _ := m.Int64ObservableGauge("trawl.ledger.raft.applied_index", metric.WithDescription("the last Raft index this replica applied"))
	lag, _ := m.Int64ObservableGauge("trawl.ledger.raft.commit_lag", metric.WithDescription("committed minus applied Raft entries on this replica"))
	pending, _ := m.Int64ObservableGauge("trawl.ledger.holds.unsettled", metric.WithDescription("charges journaled in this region and not yet settled into the ledger (settlement lag)"))
	parked, _ := m.Int64ObservableGauge("trawl.ledger.charges.parked", metric.WithDescription("charges the ledger could not take since the gate started: served and not billed; any rise needs an operator"))
	cells, _ := m.Int64ObservableGauge("trawl.gate.cells.live", metric.WithDescription("live cells of the region, as membership sees them"))
	settleLag, _ := m.Float64ObservableGauge("trawl.ledger.settlement.lag", metric.WithUnit("s"), metric.WithDescription("age of the oldest charge of this region not yet settled into the ledger; 0 when all are"))
	drained, _ := m.Int64ObservableGauge("trawl.gate.cells.drained", metric.WithDescription("live cells an operator drained (no new work)"))
	// The region's monitors live in the gate's store and their webhooks are
	// sent from here (gate/monitorstore.go), so their series are the gate's.
	monLag, _ := m.Float64ObservableGauge("trawl.monitor.check_lag", metric.WithUnit("s"), metric.WithDescription("how far the region's most overdue monitor is past its due time (checks not yet done); 0 when none is"))
	hookFailed, _ := m.Int64ObservableCounter("trawl.monitor.webhook_failed_attempts", metric.WithDescription("monitor webhook attempts that failed (each is retried on the ladder)"))
	hookGaveUp, _ := m.Int64ObservableCounter("trawl.monitor.webhook_given_up", metric.WithDescription("monitor webhook deliveries given up after the last retry"))
	region := metric.WithAttributes(attribute.String("trawl.region", rt.cfg.Region))
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		isLeader, ap, co := rt.node.Progress()
		l := int64(0)
		if isLeader {
			l = 1
		}
		o.ObserveInt64(leader, l, region)
		o.ObserveInt64(applied, int64(ap), region)
		o.ObserveInt64(lag, int64(co)-int64(ap), region)
		cm := rt.holds.Metrics()
		o.ObserveInt64(pending, cm.Pending, region)
		o.ObserveInt64(parked, cm.ParkedCharges, region)
		live := rt.Cells()
		o.ObserveInt64(cells, int64(len(live)), region)
		o.ObserveInt64(drained, int64(len(live)-len(rt.WorkCells())), region)
		sl := 0.0
		if t, ok, err := rt.holds.OldestUnsettled(); err == nil && ok {
			sl = max(0, rt.cfg.Now().Sub(t).Seconds())
		}
		o.ObserveFloat64(settleLag, sl, region)
		if ms := rt.monitors; ms != nil {
			if l, err := ms.local.Lag(rt.cfg.Now()); err == nil {
				o.ObserveFloat64(monLag, l.Seconds(), region)
			}
			if ms.hooks != nil {
				a, g := ms.hooks.Failures()
				o.ObserveInt64(hookFailed, a, region)
				o.ObserveInt64(hookGaveUp, g, region)
			}
		}
		return nil
	}, leader, applied, lag, pending, parked, cells, settleLag, drained, monLag, hookFailed, hookGaveUp)
}
