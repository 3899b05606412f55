package cell

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/trawlhq/trawl/internal/metering"
	"github.com/trawlhq/trawl/internal/nettest"
)

// frameOf splits a batch line into its usage, its signature and the line
// without them.
func frameOf(t *testing.T, line []byte) (string, string, map[string]any) {
	t.Helper()
	rest, ok := bytes.CutPrefix(line, []byte(metering.LinePrefix))
	if !ok {
		t.Fatalf("line without its usage: %s", line)
	}
	d := json.NewDecoder(bytes.NewReader(rest))
	var raw json.RawMessage
	if err := d.Decode(&raw); err != nil {
		t.Fatal(err)
	}
	rest = rest[d.InputOffset():]
	rest, ok = bytes.CutPrefix(rest, []byte(metering.LineSig))
	if !ok || len(rest) < 66 {
		t.Fatalf("line without its signature: %s", line)
	}
	sig := string(rest[:64])
	var fields map[string]any
	if err := json.Unmarshal(append([]byte{'{'}, rest[66:]...), &fields); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	return string(raw), sig, fields
}

// Issue 12, items 7 and 8: every batch line carries its own usage, signed
// over the request's nonce and the line's place; an ok line bills one URL
// as it was produced, a failed line — a site that does not answer, a host
// the SSRF guard refuses at dial time — bills nothing. The header bills
// nothing and says the lines do.
func TestBatchLinesCarryTheirUsage(t *testing.T) {
	o := newOrigin(t)
	// A guarded cell: "private.test" passes the URL checks and resolves to
	// loopback, so only the dial-time guard refuses it.
	resolver := nettest.StaticDNS(t, map[string][]netip.Addr{"private.test": {netip.MustParseAddr("127.0.0.1")}})
	tc := newTestCell(t, func(c *Config) { c.AllowPrivateNetworks = false; c.Resolver = resolver })
	_, port, _ := strings.Cut(strings.TrimPrefix(o.URL, "http://"), ":")
	resp, b := tc.post(t, "/scrape/batch", fmt.Sprintf(`{"urls":["http://private.test:%s/a","http://private.test:%s/b"]}`, port, port))
	if resp.StatusCode != 200 {
		t.Fatalf("batch: %d %s", resp.StatusCode, b)
	}
	head, err := metering.Parse(resp.Header.Get(UsageHeader))
	if err != nil || !head.PerLine || head.Count == nil || *head.Count != 0 {
		t.Fatalf("header usage %q: %v", resp.Header.Get(UsageHeader), err)
	}
	nonce := resp.Header.Get(testNonceHeader)
	sc := bufio.NewScanner(bytes.NewReader(b))
	i := 0
	for sc.Scan() {
		raw, sig, fields := frameOf(t, sc.Bytes())
		if !testKeys.VerifyAnswer(metering.LineNonce(nonce, i), 200, raw, sig) {
			t.Errorf("line %d: signature does not verify", i)
		}
		u, _ := metering.Parse(raw)
		if fields["ok"] != false || !strings.Contains(fmt.Sprint(fields["message"]), "not public") || u.Count == nil || *u.Count != 0 {
			t.Errorf("line %d refused at dial time: usage %s, %v", i, raw, fields)
		}
		i++
	}
	if i != 2 {
		t.Fatalf("%d lines", i)
	}

	// An open cell: an ok line bills one, a dead site nothing.
	tc = newTestCell(t, nil)
	resp, b = tc.post(t, "/scrape/batch", fmt.Sprintf(`{"urls":[%q,"http://127.0.0.1:1/"]}`, o.URL+"/page"))
	nonce = resp.Header.Get(testNonceHeader)
	sc = bufio.NewScanner(bytes.NewReader(b))
	counts := map[bool]int{}
	for i = 0; sc.Scan(); i++ {
		raw, sig, fields := frameOf(t, sc.Bytes())
		if !testKeys.VerifyAnswer(metering.LineNonce(nonce, i), 200, raw, sig) {
			t.Errorf("line %d: signature does not verify", i)
		}
		u, _ := metering.Parse(raw)
		counts[fields["ok"] == true] += *u.Count
		if fields["ok"] == true && (u.Kind != metering.KindBatch || u.Engine != metering.EngineHTTP || u.Cache != metering.CacheMiss) {
			t.Errorf("ok line usage %s", raw)
		}
	}
	if i != 2 || counts[true] != 1 || counts[false] != 0 {
		t.Fatalf("%d lines, billed counts %v", i, counts)
	}
}

// Issue 12, items 5, 6 and 8: a job submission and a retry are held until
// the gate releases them. A held job fetches nothing; a held retry fetches
// nothing and bills only the failed URLs that can be fetched; a job's
// bill leaves out hosts the guard would refuse at dial time.
func TestJobsHeldUntilReleased(t *testing.T) {
	o := newOrigin(t)
	tc := newTestCell(t, nil)
	resp, b := tc.postHeld(t, "/scrape/jobs", fmt.Sprintf(`{"urls":[%q,"ftp://nope/"]}`, o.URL+"/held"))
	if resp.StatusCode != 202 {
		t.Fatalf("submit: %d %s", resp.StatusCode, b)
	}
	u, _ := metering.Parse(resp.Header.Get(UsageHeader))
	id := decode[map[string]string](t, b)["job_id"]
	if u.Job != id || u.Hold == "" || u.Count == nil || *u.Count != 1 {
		t.Fatalf("usage %q for job %s", resp.Header.Get(UsageHeader), id)
	}
	if s := tc.status(t, id); s.Status != "pending" || o.count("/held") != 0 {
		t.Fatalf("held job: %+v, fetched %d", s, o.count("/held"))
	}
	// Another account, or no token, releases nothing.
	req, _ := http.NewRequest("POST", tc.srv.URL+"/scrape/jobs/"+id+"/release", nil)
	req.Header.Set(metering.HoldHeader, "0123")
	if rr, err := http.DefaultClient.Do(req); err != nil || rr.StatusCode != http.StatusConflict {
		t.Fatalf("release with a wrong token: %v %v", rr, err)
	}
	tc.release(t, resp)
	tc.waitJob(t, id, func(s jobStatus) bool { return s.Status == "done" && s.Done == 1 && s.Error == 1 })

	// The retry holds nothing it cannot fetch: ftp://nope/ is not billed.
	resp, b = tc.postHeld(t, "/scrape/jobs/"+id+"/retry", "")
	if r := decode[map[string]any](t, b); resp.StatusCode != 200 || r["retried"] != 0.0 || resp.Header.Get(UsageHeader) != "" {
		t.Fatalf("retry of an unfetchable URL: %d %q %s", resp.StatusCode, resp.Header.Get(UsageHeader), b)
	}

	// A guarded cell bills no URL whose host resolves to a private address.
	resolver := nettest.StaticDNS(t, map[string][]netip.Addr{"private.test": {netip.MustParseAddr("127.0.0.1")}})
	tc = newTestCell(t, func(c *Config) { c.AllowPrivateNetworks = false; c.Resolver = resolver })
	resp, b = tc.postHeld(t, "/scrape/jobs", `{"urls":["http://private.test/a","http://private.test/b"]}`)
	if u, _ := metering.Parse(resp.Header.Get(UsageHeader)); resp.StatusCode != 202 || u.Count == nil || *u.Count != 0 {
		t.Fatalf("private hosts: %d %q %s", resp.StatusCode, resp.Header.Get(UsageHeader), b)
	}
}

func (tc *testCell) status(t *testing.T, id string) jobStatus {
	t.Helper()
	_, b := tc.get(t, "/scrape/jobs/"+id)
	return decode[jobStatus](t, b)
}
