package dashboard_test

import (
	"net/http"

	"github.com/trawlhq/trawl/cell/crawl/dashboard"
)

// The page lives at /dashboard and calls /monitor/* on the same origin, so
// it is mounted at the root of the server that serves the monitor API.
func ExampleHandler() {
	mux := http.NewServeMux()
	h := dashboard.Handler()
	mux.Handle(dashboard.Path, h)
	mux.Handle(dashboard.Path+"/", h)
	// mux.Handle("/monitor/", monitorAPI) ...
	_ = http.ListenAndServe // serve mux
}
