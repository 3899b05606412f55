package gate

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/trawlhq/trawl/internal/fcapi"
	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/regionauth"
	"github.com/trawlhq/trawl/internal/routes"
)

// crawlsHandlers serve GET /v2/crawl/active (docs/firecrawl.md): an
// account's crawls run on the cells that took them, so the gate asks
// every live cell of its region (GET /crawls/active, signed with the
// account) and merges their lists. A cell that does not answer is left
// out of the list (its crawls keep running); the answer says nothing of
// other regions.
func (rt *Runtime) crawlsHandlers(account func(*http.Request) string) routes.Handlers {
	return routes.Handlers{"GET /v2/crawl/active": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		acct := account(r)
		if acct == "" {
			fcapi.WriteError(w, &fcapi.Error{Status: http.StatusUnauthorized, Code: "UNAUTHORIZED", Message: "a key is required"})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		var mu sync.Mutex
		var wg sync.WaitGroup
		crawls := []json.RawMessage{}
		for _, c := range rt.Cells() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.API+"/crawls/active", nil)
				if err != nil {
					return
				}
				a, err := rt.cfg.RegionKeys.Do(http.DefaultClient, req, regionauth.Claims{Account: acct, Private: rt.cfg.AllowPrivateNetworks}, rt.cfg.Now(), 8<<20)
				if err == nil {
					err = a.OK()
				}
				var got struct {
					Crawls []json.RawMessage `json:"crawls"`
				}
				if err == nil {
					err = json.Unmarshal(a.Body, &got)
				}
				if err != nil {
					rt.cfg.Logger.Warn("crawls: a cell's active crawls", "cell", c.Name, "err", err)
					return
				}
				mu.Lock()
				crawls = append(crawls, got.Crawls...)
				mu.Unlock()
			}()
		}
		wg.Wait()
		httpjson.Write(w, http.StatusOK, map[string]any{"success": true, "crawls": crawls})
	})}
}
