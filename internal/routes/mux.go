package routes

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/trawlhq/trawl/internal/httpjson"
)

// Handlers are a server's handlers by row pattern ("POST /scrape/jobs").
type Handlers map[string]http.Handler

// MuxOptions are what a server adds to its rows.
type MuxOptions struct {
	// NotAllowed answers a method the path does not take; allow lists the
	// path's methods. Default: 405 with Allow and the API's JSON error
	// method_not_allowed.
	NotAllowed func(w http.ResponseWriter, r *http.Request, allow string)
	// SpanPrefix, when set, renames the request's span (started by the
	// server before routing) to SpanPrefix + the row's pattern
	// ("cell POST /monitors/{id}"): span names stay few and carry no id.
	SpanPrefix string
}

type rowKey struct{}

// From is the row a request was routed by (Mux puts it in the request's
// context); nil outside a Mux.
func From(ctx context.Context) *Route {
	r, _ := ctx.Value(rowKey{}).(*Route)
	return r
}

// Limit is the body limit of r's row; 0 outside a Mux.
func Limit(r *http.Request) int64 {
	if row := From(r.Context()); row != nil {
		return row.BodyLimit
	}
	return 0
}

// Mux registers each row with its handler on a new ServeMux: the row in
// the request's context (From, Limit), HEAD answered by a GET row, another
// method of the path answered by o.NotAllowed. Every row needs a handler and
// every handler a row: either missing is an error, so a route and its
// handler cannot drift apart.
func Mux(rows []Route, hs Handlers, o MuxOptions) (*http.ServeMux, error) {
	if o.NotAllowed == nil {
		o.NotAllowed = notAllowed
	}
	type path struct {
		methods map[string]http.Handler // "" for a row of every method
	}
	byPath := map[string]*path{}
	var order []string
	used := map[string]bool{}
	for i := range rows {
		row := &rows[i]
		h, ok := hs[row.Pattern]
		if !ok {
			return nil, fmt.Errorf("routes: %q has no handler", row.Pattern)
		}
		used[row.Pattern] = true
		p := byPath[row.Path()]
		if p == nil {
			p = &path{methods: map[string]http.Handler{}}
			byPath[row.Path()] = p
			order = append(order, row.Path())
		}
		p.methods[row.Method()] = withRow(row, h, o.SpanPrefix)
	}
	for pattern := range hs {
		if !used[pattern] {
			return nil, fmt.Errorf("routes: handler %q serves no row", pattern)
		}
	}
	mux := http.NewServeMux()
	for _, pp := range order {
		methods := byPath[pp].methods
		if h, ok := methods[""]; ok {
			if err := handle(mux, pp, h); err != nil {
				return nil, err
			}
			continue
		}
		allow := slices.Sorted(maps.Keys(methods))
		if methods[http.MethodGet] != nil && methods[http.MethodHead] == nil {
			methods[http.MethodHead] = methods[http.MethodGet]
		}
		allowed := strings.Join(allow, ", ")
		err := handle(mux, pp, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if h, ok := methods[r.Method]; ok {
				h.ServeHTTP(w, r)
				return
			}
			o.NotAllowed(w, r, allowed)
		}))
		if err != nil {
			return nil, err
		}
	}
	return mux, nil
}

func handle(mux *http.ServeMux, pattern string, h http.Handler) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("routes: %q: %v", pattern, v)
		}
	}()
	mux.Handle(pattern, h)
	return nil
}

func withRow(row *Route, h http.Handler, spanPrefix string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if spanPrefix != "" {
			trace.SpanFromContext(r.Context()).SetName(spanPrefix + row.Pattern)
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), rowKey{}, row)))
	})
}

func notAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	httpjson.Error(w, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not allowed on "+r.URL.Path+"; use "+allow)
}
