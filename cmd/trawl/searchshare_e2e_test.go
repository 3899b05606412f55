package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/testwait"
)

// wordOf is a word no other page of the run has: letters only (the
// analyzer splits digits off), two kinds so that a query asked after a
// change is not one the gate answered (and kept a minute) before it.
func wordOf(kind string, i int) string {
	return fmt.Sprintf("%s%c%c%c", kind, 'a'+i/676%26, 'a'+i/26%26, 'a'+i%26)
}

// gateFinds reports whether the gate's GET /search for q has u among its
// results.
func gateFinds(gate, q, u string) bool {
	a, err := tryGateCall("GET", gate+"/search?q="+url.QueryEscape(q), "")
	if err != nil || a.status != 200 {
		return false
	}
	var resp struct {
		Results []struct{ URL string } `json:"results"`
	}
	if json.Unmarshal(a.body, &resp) != nil {
		return false
	}
	for _, r := range resp.Results {
		if r.URL == u {
			return true
		}
	}
	return false
}

// Issue 33, search: a page archived on one cell is indexed on two (cell/
// pages.go), so a dead cell takes nothing out of the answers; a cell back
// on an empty disk reads its pages and the copies it held again. Three
// clustered cell processes and a gate; a job's pages, each with words of
// its own, fetched across the cells; c2 killed -9; every page found
// through the gate within 30 s. Then c2 restarts on an empty directory.
func TestSearchSurvivesDeadCell(t *testing.T) {
	const n = 90
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/w/"))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		time.Sleep(50 * time.Millisecond) // long enough that every cell takes some
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html><head><title>Notes on %[1]s</title></head><body><main><h1>Notes on %[1]s</h1>
<p>This page tells of %[1]s and of %[2]s, in a paragraph long enough to be the main content of the page it is on.</p></main></body></html>`, wordOf("kw", i), wordOf("qz", i))
	}))
	t.Cleanup(site.Close)
	r := startShareRegion(t, 3, 4)
	urls := make([]string, n)
	for i := range urls {
		urls[i] = fmt.Sprintf("%s/w/%d", site.URL, i)
	}
	id, _ := submitThroughGate(t, r.gate, urls)
	waitJobDone(t, 2*time.Minute, "the job", func() (jobStatus, error) { return gateJobStatus(r.gate, id) })

	// Every page is copied to one other cell, and indexed there.
	var copies []string
	if err := testwait.Poll(60*time.Second, func() bool {
		var sent, indexed uint64
		copies = copies[:0]
		for _, name := range r.names {
			h, err := getCellHealth(r.cells[name].base)
			if err != nil {
				return false
			}
			copies = append(copies, fmt.Sprintf("%s %+v", name, h.PageCopies))
			sent += h.PageCopies.Sent
			indexed += h.PageCopies.Indexed
		}
		// At least: a page archived while a cell began copying may be
		// sent twice, by its archiving and by the start's catch-up of
		// the copies owed (cell/owed.go), and indexed twice.
		return sent >= n && indexed >= n
	}); err != nil {
		t.Fatalf("%v: every page sent to another cell and indexed there; page copies %v", err, copies)
	}
	before := map[string]cellHealth{}
	for _, name := range r.names {
		h, _ := getCellHealth(r.cells[name].base)
		before[name] = h
		t.Logf("%s fetched %d of the job's pages; page copies %+v", name, h.JobShare.Fetched, h.PageCopies)
	}
	victim := r.cells["c2"]
	if before["c2"].PageCopies.Sent == 0 || before["c2"].PageCopies.Indexed == 0 {
		t.Fatalf("c2 archived no page or holds no copy (%+v): nothing would be tested", before["c2"].PageCopies)
	}
	for i, u := range urls {
		if !gateFinds(r.gate, wordOf("kw", i), u) {
			testwait.Until(t, 30*time.Second, "page "+strconv.Itoa(i)+" searchable through the gate", func() bool { return gateFinds(r.gate, wordOf("kw", i), u) })
		}
	}

	victim.p.kill(t)
	killed := time.Now()
	missing := map[int]bool{}
	for i := range urls {
		missing[i] = true
	}
	var first, last time.Duration
	testwait.Until(t, 30*time.Second, "every page found through the gate with c2 dead", func() bool {
		for i := range missing {
			if gateFinds(r.gate, wordOf("qz", i), urls[i]) {
				delete(missing, i)
				if first == 0 {
					first = time.Since(killed)
				}
			}
		}
		last = time.Since(killed)
		return len(missing) == 0
	})
	t.Logf("c2 killed: all %d pages found through the gate again, the first %v and the last %v after the kill", n, first.Round(10*time.Millisecond), last.Round(10*time.Millisecond))

	// c2 back on an empty directory: it reads again the copies of its own
	// pages the others hold, and the copies it held for them.
	victim.wipeData(t)
	restarted := time.Now()
	r.startCell(t, victim)
	var h cellHealth
	testwait.Until(t, 2*time.Minute, "c2 on an empty directory indexes its pages and its copies again", func() bool {
		var err error
		h, err = getCellHealth(victim.base)
		return err == nil && h.PageCopies.Replayed == before["c2"].PageCopies.Sent && h.PageCopies.Indexed == before["c2"].PageCopies.Indexed
	})
	t.Logf("c2 restarted on an empty directory: %d of its pages and %d copies indexed again %v after the restart",
		h.PageCopies.Replayed, h.PageCopies.Indexed, time.Since(restarted).Round(10*time.Millisecond))
}
