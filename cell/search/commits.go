package search

import (
	"sync"
	"time"
)

// commits orders the batches that Add commits at once. Building a batch's
// segment is most of a batch's work and runs on the goroutine that
// commits it, so one batch at a time uses one core at most, and beside a
// job that goroutine gets a small share of the machine
// (docs/performance.md, "Search").
//
// Two rules keep concurrent batches as one batch at a time would leave
// the index:
//   - a page's versions are committed in the order their batches were
//     prepared: a batch waits for the batches before it that hold one of
//     its pages (enter, wait);
//   - the watermark (the latest fetch time of the pages indexed, from
//     which a start catches up with the archive) counts a batch only once
//     every batch prepared before it is committed (watermark).
type commits struct {
	mu   sync.Mutex
	idle sync.Cond // signalled when a batch finishes
	// holders maps a page's URL to the last batch registered with it.
	holders map[string]*turn
	// next is the sequence number of the next batch; done are those
	// committed after an earlier one that is not, with their latest
	// fetch; below is the first sequence number not committed.
	next, below uint64
	done        map[uint64]time.Time
	latest      time.Time // the latest fetch of the batches below `below`
	stuck       bool      // a batch failed: the watermark stays
	running     int
}

// turn is one batch's place in commits.
type turn struct {
	seq   uint64
	urls  []string
	after []*turn // batches before it holding one of its pages
	ended chan struct{}
}

// enter registers a batch of urls (the caller prepares batches one at a
// time, in order).
func (c *commits) enter(urls []string) *turn {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.holders == nil {
		c.holders = map[string]*turn{}
		c.done = map[uint64]time.Time{}
		c.idle.L = &c.mu
	}
	t := &turn{seq: c.next, urls: urls, ended: make(chan struct{})}
	c.next++
	seen := map[*turn]bool{}
	for _, u := range urls {
		if h := c.holders[u]; h != nil && h != t && !seen[h] { // (a page twice in a batch)
			seen[h] = true
			t.after = append(t.after, h)
		}
		c.holders[u] = t
	}
	c.running++
	return t
}

// wait returns once the batches before t that hold one of its pages are
// committed.
func (t *turn) wait() {
	for _, h := range t.after {
		<-h.ended
	}
}

// finish ends t's commit; latest is its pages' latest fetch, counted in
// the watermark when the commit succeeded.
func (c *commits) finish(t *turn, latest time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, u := range t.urls {
		if c.holders[u] == t {
			delete(c.holders, u)
		}
	}
	if !ok {
		// A failed batch's pages are not indexed: the watermark stays
		// below them (the next start catches up from it).
		c.stuck = true
	}
	if !c.stuck {
		c.done[t.seq] = latest
		for {
			w, committed := c.done[c.below]
			if !committed {
				break
			}
			delete(c.done, c.below)
			if w.After(c.latest) {
				c.latest = w
			}
			c.below++
		}
	}
	c.running--
	close(t.ended)
	c.idle.Broadcast()
}

// watermark is the latest fetch of the batches committed with every batch
// before them.
func (c *commits) watermark() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.latest
}

// holding are the urls that a batch not yet committed holds.
func (c *commits) holding(urls []string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, u := range urls {
		if c.holders[u] != nil {
			out = append(out, u)
		}
	}
	return out
}

// drain returns once no batch is committing (the caller keeps new ones
// from being prepared meanwhile).
func (c *commits) drain() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.running > 0 {
		c.idle.Wait()
	}
}
