package regiontest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/testwait"
	"github.com/trawlhq/trawl/ledger"
)

// Firecrawl's POST /v2/extract through the gate: free to start (the
// meter checks the account can pay an extraction per URL first, else
// 402 in Firecrawl's envelope and nothing runs); each page extracted is
// charged when the gate collects the cell's background charges, and the
// status's creditsUsed is what those receipts charged.
func TestFirecrawlExtractBilledThroughTheGate(t *testing.T) {
	g := Start(t, Options{})
	pages := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, extractPage)
	}))
	t.Cleanup(pages.Close)
	key := g.Account(t, ledger.PlanFree, 100)
	schema := `{"type":"object","properties":{"name":{"type":"string"},"price":{"type":"number"},"currency":{"type":"string"}}}`
	r := call(t, "POST", g.URL+"/v2/extract", key, `{"urls":["`+pages.URL+`/a","`+pages.URL+`/b"],"schema":`+schema+`}`)
	var started struct {
		Success bool   `json:"success"`
		ID      string `json:"id"`
	}
	if err := json.Unmarshal([]byte(r.body), &started); r.status != 200 || err != nil || !started.Success || r.header.Get("X-Svc-Cost") != "0.000" {
		t.Fatalf("start: %d %s cost %q", r.status, r.body, r.header.Get("X-Svc-Cost"))
	}
	var st struct {
		Status      string          `json:"status"`
		Data        json.RawMessage `json:"data"`
		CreditsUsed float64         `json:"creditsUsed"`
	}
	testwait.Until(t, 30*time.Second, "the extraction charged and completed", func() bool {
		g.Runtime.CollectMonitorCharges(t.Context()) // rather than wait for the gate's ticker
		s := call(t, "GET", g.URL+"/v2/extract/"+started.ID, key, "")
		if s.status != 200 || json.Unmarshal([]byte(s.body), &st) != nil {
			t.Fatalf("status: %d %s", s.status, s.body)
		}
		return st.Status != "processing"
	})
	if st.Status != "completed" || string(st.Data) != `{"name":"Ridge Tent","price":199,"currency":"EUR"}` {
		t.Fatalf("status %+v %s", st, st.Data)
	}
	// Two receipts, one a page, whose credits are the answer's: the
	// first page live (1.000), the second the same page from the archive
	// or the cache the first filled.
	var sum float64
	n := 0
	for _, l := range usageLines(t, g, key) {
		if l["call"] == "extract" && strings.HasPrefix(fmt.Sprint(l["url"]), pages.URL) {
			var u float64
			fmt.Sscanf(fmt.Sprint(l["units"]), "%g", &u)
			sum += u
			n++
		}
	}
	if n != 2 || sum != st.CreditsUsed || st.CreditsUsed < 1 {
		t.Errorf("%d extract lines charging %g; the answer says %g", n, sum, st.CreditsUsed)
	}
	// Another account: Firecrawl's 404.
	other := g.Account(t, ledger.PlanFree, 10)
	if s := call(t, "GET", g.URL+"/v2/extract/"+started.ID, other, ""); s.status != 404 || !strings.Contains(s.body, `"success":false`) {
		t.Errorf("another account: %d %s", s.status, s.body)
	}

	// An account that cannot pay an extraction per URL: 402 before the
	// cell sees it, in Firecrawl's envelope.
	poor := g.Account(t, ledger.PlanFree, 1)
	r = call(t, "POST", g.URL+"/v2/extract", poor, `{"urls":["`+pages.URL+`/c","`+pages.URL+`/d"],"schema":`+schema+`}`)
	if r.status != 402 || !strings.Contains(r.body, `"success":false`) || !strings.Contains(r.body, `"code":"no_credit"`) {
		t.Errorf("without credit: %d %s", r.status, r.body)
	}
}
