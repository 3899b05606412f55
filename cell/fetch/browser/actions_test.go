package browser

import (
	"bytes"
	"context"
	"errors"
	"image/jpeg"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/internal/nettest"
)

// actionsPage has a search box, a button that echoes it, items of which
// one arrives 200 ms after load, and a long page to scroll.
const actionsPage = `<!doctype html><html><head><title>actions</title></head><body>
<input id="q"><button id="go" onclick="document.getElementById('out').textContent = 'searched ' + document.getElementById('q').value">Go</button>
<p id="out"></p><p id="keys"></p>
<button class="item" onclick="this.textContent = 'clicked'">first</button>
<div id="more"></div>
<div style="height: 3000px"></div><p id="bottom">bottom of the page</p>
<script>
document.addEventListener("keydown", e => { if (e.key === "Enter") document.getElementById("keys").textContent = "enter pressed"; });
setTimeout(() => {
  const b = document.createElement("button");
  b.id = "late"; b.className = "item"; b.textContent = "late";
  b.onclick = () => b.textContent = "clicked";
  document.getElementById("more").appendChild(b);
}, 200);
</script></body></html>`

func TestActions(t *testing.T) {
	pool := newTestPool(t, Config{})
	eng := NewEngine(pool, EngineConfig{})
	srv := nettest.NewServer(t, html(actionsPage))
	acts := []fetch.Action{
		{Type: fetch.ActionWait, Selector: "#late"},
		{Type: fetch.ActionClick, Selector: "#q"},
		{Type: fetch.ActionWrite, Text: "green tea"},
		{Type: fetch.ActionPress, Key: "Enter"},
		{Type: fetch.ActionClick, Selector: "#go"},
		{Type: fetch.ActionClick, Selector: ".item", All: true},
		{Type: fetch.ActionScroll},
		{Type: fetch.ActionScript, Script: `return window.scrollY > 0 ? document.getElementById("out").textContent : "not scrolled"`},
		{Type: fetch.ActionScript, Script: `({n: 1 + 1, list: [1, "two"]})`},
		{Type: fetch.ActionScript, Script: `async () => { await new Promise(r => setTimeout(r, 10)); }`},
		{Type: fetch.ActionScreenshot},
		{Type: fetch.ActionScreenshot, FullPage: true, Quality: 50},
		{Type: fetch.ActionScrape},
		{Type: fetch.ActionWait, Wait: 50 * time.Millisecond},
	}
	resp, err := eng.Fetch(t.Context(), &fetch.Request{URL: srv.URL, Browser: &fetch.BrowserOptions{Actions: acts}})
	if err != nil {
		t.Fatal(err)
	}
	// The capture comes after the actions.
	for _, want := range []string{"searched green tea", "enter pressed", ">clicked</button>"} {
		if !bytes.Contains(resp.Body, []byte(want)) {
			t.Errorf("the captured page lacks %q", want)
		}
	}
	if bytes.Contains(resp.Body, []byte(">late</button>")) || bytes.Contains(resp.Body, []byte(">first</button>")) {
		t.Errorf("click all left an item unclicked")
	}
	a := resp.Actions
	if a == nil || len(a.Scripts) != 3 || len(a.Screenshots) != 2 || len(a.Scrapes) != 1 {
		t.Fatalf("results: %+v", a)
	}
	for i, want := range []fetch.ScriptResult{
		{Type: "string", Value: []byte(`"searched green tea"`)},
		{Type: "object", Value: []byte(`{"n":2,"list":[1,"two"]}`)},
		{Type: "undefined", Value: []byte(`null`)},
	} {
		if got := a.Scripts[i]; got.Type != want.Type || string(got.Value) != string(want.Value) {
			t.Errorf("script %d: %s %s, want %s %s", i, got.Type, got.Value, want.Type, want.Value)
		}
	}
	shot := a.Screenshots[0]
	img, err := png.Decode(bytes.NewReader(shot.Data))
	if err != nil || shot.Type != "image/png" || img.Bounds().Dx() != 1280 || img.Bounds().Dy() != 720 {
		t.Errorf("viewport screenshot: %s %v %v", shot.Type, img.Bounds(), err)
	}
	shot = a.Screenshots[1]
	img, err = jpeg.Decode(bytes.NewReader(shot.Data))
	if err != nil || shot.Type != "image/jpeg" || img.Bounds().Dy() < 3000 {
		t.Errorf("full-page JPEG: %s %v", shot.Type, err)
	}
	sc := a.Scrapes[0]
	if sc.URL != srv.URL+"/" || !strings.Contains(sc.HTML, "searched green tea") {
		t.Errorf("scrape action: %s %.200s", sc.URL, sc.HTML)
	}
}

// A failed action names itself and says why, before the page's deadline;
// a pause longer than the page has is the deadline's.
func TestActionFailures(t *testing.T) {
	pool := newTestPool(t, Config{})
	eng := NewEngine(pool, EngineConfig{})
	srv := nettest.NewServer(t, html(actionsPage))
	if _, err := eng.Fetch(t.Context(), &fetch.Request{URL: srv.URL}); err != nil {
		t.Fatal(err) // warm up: the first page of a browser is the slowest
	}
	tests := []struct {
		name  string
		acts  []fetch.Action
		index int
	}{
		{"selector never appears", []fetch.Action{{Type: fetch.ActionWait, Selector: "#never"}}, 0},
		{"click on nothing", []fetch.Action{{Type: fetch.ActionWait, Wait: time.Millisecond}, {Type: fetch.ActionClick, Selector: "#nothing"}}, 1},
		{"script throws", []fetch.Action{{Type: fetch.ActionScript, Script: `throw new Error("boom")`}}, 0},
		{"unknown key", []fetch.Action{{Type: fetch.ActionPress, Key: "NoSuchKey"}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := eng.Fetch(t.Context(), &fetch.Request{URL: srv.URL, Browser: &fetch.BrowserOptions{Actions: tt.acts, Timeout: 6 * time.Second}})
			ae, ok := errors.AsType[*ActionError](err)
			if !ok || !errors.Is(err, ErrAction) || ae.Index != tt.index || errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%v: want the action error of action %d", err, tt.index)
			}
		})
	}
	_, err := eng.Fetch(t.Context(), &fetch.Request{URL: srv.URL, Browser: &fetch.BrowserOptions{
		Actions: []fetch.Action{{Type: fetch.ActionWait, Wait: time.Minute}}, Timeout: 2 * time.Second}})
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrAction) {
		t.Errorf("a pause past the page deadline: %v", err)
	}
}

func TestCheckActions(t *testing.T) {
	for _, acts := range [][]fetch.Action{
		{{Type: "teleport"}},
		{{Type: fetch.ActionWait}},
		{{Type: fetch.ActionWait, Wait: time.Second, Selector: "p"}},
		{{Type: fetch.ActionClick}},
		{{Type: fetch.ActionScreenshot, Quality: 101}},
		make([]fetch.Action, fetch.MaxActions+1),
	} {
		if err := checkActions(acts); !errors.Is(err, ErrOptions) {
			t.Errorf("%+v: %v", acts, err)
		}
	}
	if err := checkActions([]fetch.Action{{Type: fetch.ActionScrape}, {Type: fetch.ActionScroll, Up: true}}); err != nil {
		t.Error(err)
	}
}
