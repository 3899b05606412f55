package cell

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/trawlhq/trawl/cell/firecrawl"
	"github.com/trawlhq/trawl/internal/monstore"
	"github.com/trawlhq/trawl/internal/store"
)

// Firecrawl's changeTracking format (docs/firecrawl.md, "Change
// tracking"): the page's Markdown compared with the one the same account
// got when it last scraped the URL with change tracking and the same tag.
// That snapshot is kept in the region's monitor store (at the gate, so
// every cell of the region compares with the same one; a cell without a
// gate keeps it in its own store), one per account, tag and URL, replaced
// by each tracked scrape. It belongs to the account: another account's
// scrape of the URL neither sees it nor changes it.

// trackKey is the snapshot's key: account, tag and URL, hashed so a key
// is short and says nothing of the URL.
func trackKey(account, tag, url string) []byte {
	sum := sha256.Sum256([]byte(account + "\x00" + tag + "\x00" + url))
	return []byte(monstore.TrackPrefix + account + "/" + hex.EncodeToString(sum[:16]))
}

// v2Track fills doc's changeTracking for account's scrape of url and
// keeps the page as the next scrape's snapshot.
func (c *Cell) v2Track(ctx context.Context, account, url string, plan *firecrawl.Plan, doc *firecrawl.Document) error {
	if plan.Track == nil {
		return nil
	}
	if account == "" {
		return &firecrawl.Error{Status: http.StatusForbidden, Code: "FORBIDDEN", Message: "change tracking needs an account"}
	}
	key := trackKey(account, plan.Track.Tag, url)
	var prev *firecrawl.Snapshot
	raw, err := c.tracks.Get(ctx, key)
	switch {
	case err == nil:
		prev = &firecrawl.Snapshot{}
		if err := json.Unmarshal(raw, prev); err != nil {
			return fmt.Errorf("change tracking: the snapshot of %s: %w", url, err)
		}
	case !errors.Is(err, store.ErrNotFound):
		return &firecrawl.Error{Status: http.StatusServiceUnavailable, Code: "CHANGE_TRACKING_UNAVAILABLE",
			Message: "the page's last snapshot could not be read from the region's store; repeat the request in a few seconds"}
	}
	md := ""
	if doc.Markdown != nil {
		md = *doc.Markdown
	}
	status, _ := doc.Metadata["statusCode"].(int)
	missing := status == http.StatusNotFound || status == http.StatusGone
	ct, next := firecrawl.Track(plan.Track, prev, md, missing, c.cfg.Now())
	doc.ChangeTracking = ct
	nb, _ := json.Marshal(next)
	b := &monstore.Batch{Sync: true}
	b.Set(key, nb)
	if err := c.tracks.Apply(ctx, b); err != nil {
		return &firecrawl.Error{Status: http.StatusServiceUnavailable, Code: "CHANGE_TRACKING_UNAVAILABLE",
			Message: "the page's snapshot could not be kept in the region's store; repeat the request in a few seconds"}
	}
	return nil
}
