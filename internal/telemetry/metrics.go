package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// Metrics is a process's metrics pipeline: OpenTelemetry instruments
// (every package takes its meter from otel.Meter) read by a Prometheus
// endpoint on an operator port and, when OTEL_METRICS_EXPORTER asks for
// it, pushed over OTLP as the traces are.
type Metrics struct {
	// Addr is where GET /metrics answers ("" with no listen address).
	Addr     string
	srv      *http.Server
	provider *sdkmetric.MeterProvider
}

// SetupMetrics installs the global meter provider. listen is the operator
// address of the Prometheus endpoint (host:port; "" for none: keep it off
// the public interface, it is not authenticated). With neither a listen
// address nor OTEL_METRICS_EXPORTER the instruments stay no-ops.
func SetupMetrics(ctx context.Context, listen string, logger *slog.Logger) (*Metrics, error) {
	var opts []sdkmetric.Option
	m := &Metrics{}
	if listen != "" {
		reg := prometheus.NewRegistry()
		exp, err := otelprom.New(otelprom.WithRegisterer(reg))
		if err != nil {
			return nil, fmt.Errorf("telemetry: prometheus exporter: %w", err)
		}
		opts = append(opts, sdkmetric.WithReader(exp))
		l, err := net.Listen("tcp", listen)
		if err != nil {
			return nil, fmt.Errorf("telemetry: metrics listen %s: %w", listen, err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		m.Addr = l.Addr().String()
		go func() {
			if err := m.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error("metrics endpoint stopped", "err", err)
			}
		}()
	}
	if v := os.Getenv("OTEL_METRICS_EXPORTER"); v != "" && v != "none" {
		r, err := autoexport.NewMetricReader(ctx)
		if err != nil {
			return nil, fmt.Errorf("telemetry: metric exporter: %w", err)
		}
		opts = append(opts, sdkmetric.WithReader(r))
	}
	if len(opts) == 0 {
		return m, nil
	}
	m.provider = sdkmetric.NewMeterProvider(opts...)
	otel.SetMeterProvider(m.provider)
	return m, nil
}

// Shutdown stops the endpoint and flushes the exporters.
func (m *Metrics) Shutdown(ctx context.Context) error {
	var errs []error
	if m.srv != nil {
		errs = append(errs, m.srv.Shutdown(ctx))
	}
	if m.provider != nil {
		errs = append(errs, m.provider.Shutdown(ctx))
	}
	return errors.Join(errs...)
}
