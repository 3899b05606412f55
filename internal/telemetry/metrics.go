package telemetry

import (
	"context"
	"crypto/subtle"
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

// EnvMetricsToken names the bearer token the Prometheus endpoint requires.
const EnvMetricsToken = "TRAWL_METRICS_TOKEN"

// SetupMetrics installs the global meter provider. listen is the operator
// address of the Prometheus endpoint (host:port; "" for none). The
// endpoint requires `Authorization: Bearer $TRAWL_METRICS_TOKEN` when that
// is set, and refuses to listen beyond loopback without it: no port of
// trawl answers a stranger. With neither a listen address nor
// OTEL_METRICS_EXPORTER the instruments stay no-ops.
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
		token := os.Getenv(EnvMetricsToken)
		if token == "" && !loopback(listen) {
			return nil, fmt.Errorf("telemetry: the metrics endpoint %s is not on loopback: set %s (Prometheus: authorization: {credentials: …})", listen, EnvMetricsToken)
		}
		l, err := net.Listen("tcp", listen)
		if err != nil {
			return nil, fmt.Errorf("telemetry: metrics listen %s: %w", listen, err)
		}
		var h http.Handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
		if token != "" {
			h = bearer(token, h)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", h)
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

// loopback reports whether a listen address is on loopback only.
func loopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// bearer answers 401 unless the request carries the token.
func bearer(token string, next http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="trawl metrics"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":"unauthorized","message":"send the metrics token as Authorization: Bearer <token>"}` + "\n"))
			return
		}
		next.ServeHTTP(w, r)
	})
}
