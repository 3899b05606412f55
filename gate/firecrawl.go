package gate

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/trawlhq/trawl/internal/fcapi"
	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/members"
	"github.com/trawlhq/trawl/internal/regionauth"
	"github.com/trawlhq/trawl/internal/routes"
)

// The gate's Firecrawl v2 routes about an account's work
// (docs/firecrawl.md): its crawls still running and its queue, which live
// on the cells that took them (so the gate asks every live cell of its
// region, signed with the account, and merges their answers: a cell that
// does not answer is left out; nothing of other regions is counted), and
// its requests in flight at this gate.
func (rt *Runtime) firecrawlHandlers() routes.Handlers {
	authed := func(h func(http.ResponseWriter, *http.Request, string)) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := IdentityFrom(r.Context())
			if id == nil || id.Account == nil {
				fcapi.WriteError(w, &fcapi.Error{Status: http.StatusUnauthorized, Code: "UNAUTHORIZED", Message: "a key is required"})
				return
			}
			h(w, r, id.Account.ID)
		})
	}
	plan := func(r *http.Request) string { return IdentityFrom(r.Context()).Account.Plan }
	return routes.Handlers{
		"GET /v2/crawl/active": authed(func(w http.ResponseWriter, r *http.Request, acct string) {
			// A down owner's crawls come from the region's coordinator,
			// which feeds them; for a moment after the owner is back both
			// list one: each id once.
			crawls := []json.RawMessage{}
			seen := map[string]bool{}
			rt.askCells(r.Context(), acct, "/crawls/active", func(body []byte) {
				var got struct {
					Crawls []json.RawMessage `json:"crawls"`
				}
				if json.Unmarshal(body, &got) != nil {
					return
				}
				for _, c := range got.Crawls {
					var ref struct{ ID string }
					if json.Unmarshal(c, &ref) == nil && ref.ID != "" && seen[ref.ID] {
						continue
					}
					seen[ref.ID] = true
					crawls = append(crawls, c)
				}
			})
			httpjson.Write(w, http.StatusOK, map[string]any{"success": true, "crawls": crawls})
		}),
		"GET /v2/team/queue-status": authed(func(w http.ResponseWriter, r *http.Request, acct string) {
			var active, waiting int
			var last string
			rt.askCells(r.Context(), acct, "/jobs/queue", func(body []byte) {
				var got struct {
					Active, Waiting int
					Last            string
				}
				if json.Unmarshal(body, &got) == nil {
					active, waiting = active+got.Active, waiting+got.Waiting
					if got.Last > last { // RFC 3339 in UTC sorts as time
						last = got.Last
					}
				}
			})
			_, max := rt.InFlight(acct, plan(r))
			out := map[string]any{"success": true, "jobsInQueue": active + waiting, "activeJobsInQueue": active,
				"waitingJobsInQueue": waiting, "maxConcurrency": max, "mostRecentSuccess": nil}
			if last != "" {
				out["mostRecentSuccess"] = last
			}
			httpjson.Write(w, http.StatusOK, out)
		}),
		"GET /v2/concurrency-check": authed(func(w http.ResponseWriter, r *http.Request, acct string) {
			n, max := rt.InFlight(acct, plan(r))
			httpjson.Write(w, http.StatusOK, map[string]any{"success": true, "concurrency": n, "maxConcurrency": max})
		}),
	}
}

// askCells sends GET path, signed with account, to every live cell of the
// region at once and hands each signed 200 answer's body to take (one at a
// time).
func (rt *Runtime) askCells(ctx context.Context, account, path string, take func(body []byte)) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range rt.Cells() {
		wg.Add(1)
		go func(c members.Meta) {
			defer wg.Done()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.API+path, nil)
			if err != nil {
				return
			}
			a, err := rt.cfg.RegionKeys.Do(http.DefaultClient, req, regionauth.Claims{Account: account, Private: rt.cfg.AllowPrivateNetworks}, rt.cfg.Now(), 8<<20)
			if err == nil {
				err = a.OK()
			}
			if err != nil {
				rt.cfg.Logger.Warn("firecrawl: a cell's answer", "cell", c.Name, "path", path, "err", err)
				return
			}
			mu.Lock()
			take(a.Body)
			mu.Unlock()
		}(c)
	}
	wg.Wait()
}

// InFlight is the account's requests in flight at this gate and the most
// its plan allows at once (0: no bound), as the rate limiter counts them
// (SetInFlight); without one, 0 and the price table's bound.
func (rt *Runtime) InFlight(account, plan string) (n, max int) {
	rt.inflightMu.RLock()
	f := rt.inflight
	rt.inflightMu.RUnlock()
	if f == nil {
		return 0, rt.Prices().Plans[plan].Concurrency
	}
	return f(account, plan)
}

// SetInFlight is how the rate limiter (caddy-modules/ratelimit) lets the
// gate's routes read an account's requests in flight.
func (rt *Runtime) SetInFlight(f func(account, plan string) (n, max int)) {
	rt.inflightMu.Lock()
	rt.inflight = f
	rt.inflightMu.Unlock()
}
