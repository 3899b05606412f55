package cell

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/trawlhq/trawl/cell/fchook"
	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/cell/firecrawl"
	"github.com/trawlhq/trawl/internal/httpjson"
	"github.com/trawlhq/trawl/internal/store"
	"github.com/trawlhq/trawl/internal/webhook"
)

// Firecrawl's webhooks on batch scrapes and crawls (docs/firecrawl.md,
// "Webhooks"): a submission's `webhook` is read by v2Webhook and kept in
// the job's shape with the account's secret; the jobs manager's observer
// (cell/fchook) stages a delivery for each event the webhook asks for in
// the write that records the event, and the cell's sender (v2Hooks, on
// its own store range) sends them on the monitors' retry ladder.

// WebhookSecrets gives an account's webhook secret (Config.WebhookSecrets).
type WebhookSecrets interface {
	WebhookSecret(ctx context.Context, account string) (string, error)
}

// newV2Hooks makes the webhooks' sender (run by startV2Hooks) and the
// jobs manager's observer that stages their deliveries.
func (c *Cell) newV2Hooks(st *store.Store) (*fchook.Observer, error) {
	var o *fchook.Observer
	s, err := webhook.New(st, webhook.Config{
		OnFinish:             func(d webhook.Delivery) { o.Finished(d) },
		Settled:              func(d webhook.Delivery) bool { return o.Settled(d) },
		Prefix:               store.PrefixFirecrawlHook,
		DuePrefix:            store.PrefixFirecrawlHookDue,
		AllowPrivateNetworks: c.cfg.AllowPrivateNetworks,
		Schedule:             c.cfg.Monitor.WebhookRetries, // --webhook-retries, as monitors'
		Now:                  c.cfg.Now,
		Logger:               c.cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	c.v2Hooks = s
	o = fchook.New(s, c.cfg.Logger)
	return o, nil
}

// startV2Hooks runs the webhooks' sender until Close; deliveries a
// previous run left pending go first.
func (c *Cell) startV2Hooks() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.v2Hooks.Run(ctx); close(done) }()
	c.stopV2Hooks = func() { cancel(); <-done; c.v2Hooks.Close() }
}

// v2Webhook reads the `webhook` of a batch scrape or crawl submitted by
// r's account: nil for none; otherwise checked (firecrawl.ParseWebhook,
// and on a guarded cell the host's resolution) and signed with the
// account's webhook secret, which the region's gate keeps (made on the
// account's first webhook). Call it when the rest of the submission is
// valid, and keep the answer as the "webhook" of the job's shape. Its
// refusals are Firecrawl's 400s; without the gate's answer, a 503.
func (c *Cell) v2Webhook(r *http.Request, raw json.RawMessage) (*firecrawl.Webhook, error) {
	w, err := firecrawl.ParseWebhook(raw, c.cfg.AllowPrivateNetworks)
	if err != nil || w == nil {
		return nil, err
	}
	if !c.cfg.AllowPrivateNetworks {
		u, _ := url.Parse(w.URL) // ParseWebhook checked it
		if err := c.engine.CheckHost(r.Context(), u.Hostname()); errors.Is(err, fetch.ErrNotPublic) {
			return nil, firecrawl.BadRequest("webhook.url", "webhook.url's host is not public")
		}
	}
	unavailable := &httpjson.HTTPError{Status: http.StatusServiceUnavailable, Code: "webhook_secret_unavailable", RetryAfter: 5 * time.Second,
		Message: "the account's webhook secret could not be read from the region's gate; nothing was started, repeat the request in a few seconds"}
	if c.cfg.WebhookSecrets == nil {
		c.cfg.Logger.Error("a webhook was refused: this cell has no gate to keep webhook secrets")
		return nil, unavailable
	}
	secret, err := c.cfg.WebhookSecrets.WebhookSecret(r.Context(), accountOf(r))
	if err != nil {
		c.cfg.Logger.Warn("webhook secret", "account", accountOf(r), "err", err)
		return nil, unavailable
	}
	w.Secret = secret
	return w, nil
}
