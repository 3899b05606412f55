package cell

import (
	"net/http"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

var tracer = otel.Tracer("github.com/trawlhq/trawl/cell")

// traced continues the gate's W3C trace context and records the cell's
// work as a server span named for the route ("cell POST /scrape"). With no
// tracer provider set (tracing off) the span is a no-op.
func traced(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tracer.Start(ctx, "cell "+r.Method+" "+routeName(r.URL.Path), trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("url.path", r.URL.Path)))
		defer span.End()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r.WithContext(ctx))
		span.SetAttributes(attribute.Int("http.response.status_code", sw.status))
		if u := sw.Header().Get(UsageHeader); u != "" {
			span.SetAttributes(attribute.String("trawl.usage", u))
			countPages(ctx, r, u)
		}
		if sw.status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(sw.status))
		}
	})
}

// routeName is the path with object ids replaced, so span names stay few.
func routeName(path string) string {
	if rest, ok := strings.CutPrefix(path, "/scrape/jobs/"); ok && rest != "" {
		_, tail, _ := strings.Cut(rest, "/")
		if tail != "" {
			return "/scrape/jobs/{id}/" + tail
		}
		return "/scrape/jobs/{id}"
	}
	return path
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

// Unwrap lets http.ResponseController reach the connection (batch
// streaming flushes through it).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
