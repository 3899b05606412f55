package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/trawlhq/trawl/internal/testwait"
)

// The price table is ledger state: an operator's change through one
// region's gate reaches every region's public table and meter.
func TestOperatorPriceChangeReachesEveryRegion(t *testing.T) {
	site := pages(t)
	const opKey = "trawl_op_e2e_0123456789abcdef"
	gp, rp := freeRun(t, 3), freeRun(t, 3)
	launch(t, []string{"TRAWL_DEV_KEY=" + e2eKey, "TRAWL_OPERATOR_KEY=" + opKey}, "dev serving", "dev", "--regions", "eu,sin,us",
		"--listen", fmt.Sprintf("127.0.0.1:%d", gp), "--ledger-raft", fmt.Sprintf("127.0.0.1:%d", rp),
		"--data", t.TempDir(), "--allow-private-networks", "--browsers", "0", "--prices", pricesFile(t, 100))
	eu, us := fmt.Sprintf("http://127.0.0.1:%d", gp), fmt.Sprintf("http://127.0.0.1:%d", gp+2)
	sin := fmt.Sprintf("http://127.0.0.1:%d", gp+1)

	op := func(method, url, body string) (int, []byte) {
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+opKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	// The dev key is a customer's: refused on the operator API.
	if a := gateCall(t, "GET", sin+"/operator/v1/prices", ""); a.status != 403 {
		t.Fatalf("dev key on the operator API: %d %s", a.status, a.body)
	}
	var pt struct {
		Version uint64         `json:"version"`
		Table   map[string]any `json:"table"`
	}
	st, b := op("GET", eu+"/operator/v1/prices", "")
	if st != 200 || json.Unmarshal(b, &pt) != nil {
		t.Fatalf("prices: %d %s", st, b)
	}
	pt.Table["calls"].(map[string]any)["scrape"].(map[string]any)["base"] = "3.000"
	body, _ := json.Marshal(pt)
	if st, b := op("PUT", eu+"/operator/v1/prices", string(body)); st != 200 {
		t.Fatalf("put prices through eu: %d %s", st, b)
	}
	for _, g := range []string{sin, us} {
		testwait.Until(t, 15*time.Second, "the new price at "+g, func() bool {
			a, err := tryGateCall("GET", g+"/v1/prices", "")
			return err == nil && strings.Contains(string(a.body), `"scrape":{"base":"3.000"`)
		})

	}
	if a := gateCall(t, "POST", us+"/scrape", `{"url":"`+site.URL+`/priced"}`); a.status != 200 || a.header.Get("X-Svc-Cost") != "3.000" {
		t.Fatalf("a scrape in us after the change: %d cost %q %s", a.status, a.header.Get("X-Svc-Cost"), a.body)
	}
}
