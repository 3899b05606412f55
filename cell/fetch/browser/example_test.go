package browser_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/cell/fetch/browser"
)

// A cell starts one pool at startup and closes it at shutdown; the engine
// renders pages in it. (Not run: it needs Chromium and the driver.)
func Example() {
	ctx := context.Background()
	pool, err := browser.NewPool(ctx, browser.Config{}) // 1 browser × 4 pages, recycled every 200 pages or 1 GiB
	if err != nil {
		log.Fatal(err) // browser.CheckInstall says what is missing
	}
	defer pool.Close()
	eng := browser.NewEngine(pool, browser.EngineConfig{})

	resp, err := eng.Fetch(ctx, &fetch.Request{
		URL: "https://example.com/app",
		Browser: &fetch.BrowserOptions{
			WaitFor:    "#results li",                                 // or "js: window.appReady === true"
			Screenshot: true,                                          // full-page PNG in resp.Screenshot
			Cookies:    []fetch.Cookie{{Name: "session", Value: "…"}}, // this request's context only
			Timeout:    30 * time.Second,
		},
	})
	switch {
	case errors.Is(err, fetch.ErrFleetBusy):
		fmt.Println("503 fleet-busy: try again in a few seconds")
	case err != nil:
		fmt.Println(err)
	default:
		fmt.Println(resp.Status, len(resp.Body), len(resp.Screenshot))
	}
	st := pool.Stats()
	fmt.Println(st.Browsers, st.PagesInUse, st.PagesServed, st.Recycles, st.Crashes)
}
