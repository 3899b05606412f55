package client

import (
	"net/http"
	"testing"
	"time"
)

func TestErrorOf(t *testing.T) {
	for _, c := range []struct {
		name   string
		status int
		header http.Header
		body   string
		want   Error
	}{
		{"trawl's", 404, nil, `{"error":"not_found","message":"no such job"}`,
			Error{Status: 404, Code: "not_found", Message: "no such job"}},
		{"Firecrawl's", 404, nil, `{"success":false,"error":"Crawl not found","code":"NOT_FOUND"}`,
			Error{Status: 404, Code: "NOT_FOUND", Message: "Crawl not found"}},
		{"429 with Retry-After", 429, http.Header{"Retry-After": {"42"}}, `{"error":"rate_limited","message":"Too many requests","retry_after_s":41}`,
			Error{Status: 429, Code: "rate_limited", Message: "Too many requests", RetryAfter: 42 * time.Second}},
		{"429 from the body", 429, nil, `{"error":"too_many_concurrent","message":"at once","retry_after_s":1}`,
			Error{Status: 429, Code: "too_many_concurrent", Message: "at once", RetryAfter: time.Second}},
		{"not JSON", 502, nil, "  Bad Gateway\n", Error{Status: 502, Message: "Bad Gateway"}},
	} {
		h := c.header
		if h == nil {
			h = http.Header{}
		}
		e := ErrorOf(c.status, h, []byte(c.body))
		if e.Status != c.want.Status || e.Code != c.want.Code || e.Message != c.want.Message || e.RetryAfter != c.want.RetryAfter {
			t.Errorf("%s: %+v", c.name, e)
		}
	}
	e := ErrorOf(402, http.Header{}, []byte(`{"error":"no_credit","balance":"0.250","message":"Top up","actions":{"topup":"POST /v1/billing/topup?amount=5"}}`))
	if e.Actions["topup"] != "POST /v1/billing/topup?amount=5" {
		t.Errorf("402 actions: %+v", e)
	}
}
