package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"

	"github.com/trawlhq/trawl/internal/telemetry"
)

// metricsListen is the operator address of the Prometheus endpoint
// (--metrics-listen, default $TRAWL_METRICS_LISTEN; "" for none).
var metricsListen = os.Getenv("TRAWL_METRICS_LISTEN")

func metricsFlag(fs *flag.FlagSet) {
	fs.StringVar(&metricsListen, "metrics-listen", metricsListen,
		"operator address of the Prometheus /metrics endpoint, e.g. 127.0.0.1:9464 (unauthenticated: keep it off public interfaces); default $TRAWL_METRICS_LISTEN, none when empty")
}

// setupTelemetry starts tracing (OTEL_* environment) and metrics
// (--metrics-listen, OTEL_METRICS_EXPORTER); the function returned stops
// both.
func setupTelemetry(ctx context.Context, service string, logger *slog.Logger) (func(context.Context) error, error) {
	stopTraces, err := telemetry.Setup(ctx, service)
	if err != nil {
		return nil, err
	}
	m, err := telemetry.SetupMetrics(ctx, metricsListen, logger)
	if err != nil {
		stopTraces(ctx)
		return nil, err
	}
	if m.Addr != "" {
		logger.Info("metrics endpoint", "addr", "http://"+m.Addr+"/metrics")
	}
	return func(ctx context.Context) error { return errors.Join(m.Shutdown(ctx), stopTraces(ctx)) }, nil
}
