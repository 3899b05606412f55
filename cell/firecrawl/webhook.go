package firecrawl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/trawlhq/trawl/internal/urlpolicy"
	"github.com/trawlhq/trawl/internal/webhook"
)

// Webhook events (the `events` of a webhook): a job is started, has a
// page event per URL with an outcome, and ends once, completed, failed or
// (trawl's) cancelled. Delivered as "<kind>.<event>": batch_scrape.page,
// crawl.completed, …
const (
	EventStarted   = "started"
	EventPage      = "page"
	EventCompleted = "completed"
	EventFailed    = "failed"
	EventCancelled = "cancelled"
)

// WebhookEvents are the events a webhook may ask for, and those it gets
// when it names none.
var WebhookEvents = []string{EventStarted, EventPage, EventCompleted, EventFailed, EventCancelled}

// SignatureHeader carries Firecrawl's signature of a delivery: "sha256="
// and the hex HMAC-SHA256 of the raw body, keyed with the account's
// webhook secret.
const SignatureHeader = "X-Firecrawl-Signature"

// Bounds of a webhook.
const (
	// MaxWebhookHeaders bounds its headers: the delivery adds its
	// signature's.
	MaxWebhookHeaders = webhook.MaxHeaders - 1
	// MaxWebhookMetadata bounds its metadata, as JSON.
	MaxWebhookMetadata = 16 << 10
)

// Webhook is the `webhook` of a batch scrape or a crawl, validated and
// normalized (ParseWebhook): a job keeps it as the "webhook" of its shape,
// where the cell's observer (cell/fchook) reads it for every event.
type Webhook struct {
	// URL receives the deliveries: http or https, a host the cell's SSRF
	// policy allows.
	URL string `json:"url"`
	// Headers are sent with every delivery.
	Headers map[string]string `json:"headers,omitempty"`
	// Metadata is echoed in every delivery's body (never null).
	Metadata map[string]string `json:"metadata"`
	// Events are the events delivered, in WebhookEvents' terms; all of
	// them when the request named none.
	Events []string `json:"events"`
	// Secret is the account's webhook secret when the job was taken,
	// which signs its deliveries. The cell fills it from the region's
	// gate, never from the request; it must not be shown to anyone (a
	// job's options, its status).
	Secret string `json:"secret,omitempty"`
}

// Wants reports whether the webhook asks for event. A cancellation is
// delivered to a webhook that asks for "cancelled" or for "failed"
// (Firecrawl's documentation has a cancelled crawl's end under failed).
func (w *Webhook) Wants(event string) bool {
	if w == nil {
		return false
	}
	if len(w.Events) == 0 || slices.Contains(w.Events, event) {
		return true
	}
	return event == EventCancelled && slices.Contains(w.Events, EventFailed)
}

// webhookRequest is the object form of a webhook, as Firecrawl takes it.
type webhookRequest struct {
	URL      *string           `json:"url"`
	Headers  map[string]string `json:"headers"`
	Metadata map[string]string `json:"metadata"`
	Events   []string          `json:"events"`
}

// ParseWebhook reads a request's `webhook`: a URL, or an object {url,
// headers, metadata, events} (other keys are refused, as Firecrawl
// does). nil for none (absent or null). The URL must be http or https
// with a host the SSRF policy allows (any host with allowPrivate); its
// name's resolution is checked when a delivery connects. Headers: at most
// MaxWebhookHeaders, not the signatures' (X-Firecrawl-Signature,
// x-svc-*) nor those the transport sets (Content-Type, Host, …); metadata
// at most MaxWebhookMetadata bytes of JSON; events among WebhookEvents. A
// refusal is a 400 BAD_REQUEST naming the field (webhook.url, …).
func ParseWebhook(raw json.RawMessage, allowPrivate bool) (*Webhook, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var req webhookRequest
	switch raw[0] {
	case '"':
		var u string
		if err := json.Unmarshal(raw, &u); err != nil {
			return nil, BadRequest("webhook", "webhook is not a valid JSON string")
		}
		req.URL = &u
	case '{':
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			return nil, webhookDecodeError(err)
		}
	default:
		return nil, BadRequest("webhook", "webhook is a URL or an object {url, headers, metadata, events}")
	}
	if req.URL == nil || *req.URL == "" {
		return nil, BadRequest("webhook.url", "webhook.url is required")
	}
	w := &Webhook{URL: *req.URL, Metadata: map[string]string{}, Events: []string{}}
	if err := webhook.Check(&webhook.Delivery{URL: w.URL}, allowPrivate); err != nil {
		msg := "webhook.url is not a valid URL"
		switch {
		case errors.Is(err, urlpolicy.ErrScheme):
			msg = "webhook.url must start with http:// or https://"
		case errors.Is(err, urlpolicy.ErrNotPublic):
			msg = "webhook.url's host is not public"
		}
		return nil, BadRequest("webhook.url", msg)
	}
	if len(req.Headers) > MaxWebhookHeaders {
		return nil, BadRequest("webhook.headers", fmt.Sprintf("webhook.headers has %d headers, at most %d", len(req.Headers), MaxWebhookHeaders))
	}
	for k, v := range req.Headers {
		if strings.EqualFold(k, SignatureHeader) {
			return nil, BadRequest("webhook.headers", "The following headers are not allowed: x-firecrawl-signature")
		}
		if err := webhook.Check(&webhook.Delivery{URL: w.URL, Header: map[string]string{k: v}}, true); err != nil {
			return nil, BadRequest("webhook.headers", fmt.Sprintf("webhook.headers: %q is not a header a webhook may set (%s)", k, http.CanonicalHeaderKey(k)))
		}
	}
	if len(req.Headers) > 0 {
		w.Headers = req.Headers
	}
	if req.Metadata != nil {
		if b, _ := json.Marshal(req.Metadata); len(b) > MaxWebhookMetadata {
			return nil, BadRequest("webhook.metadata", fmt.Sprintf("webhook.metadata is over %d bytes", MaxWebhookMetadata))
		}
		w.Metadata = req.Metadata
	}
	for i, e := range req.Events {
		if !slices.Contains(WebhookEvents, e) {
			return nil, BadRequest("webhook.events."+strconv.Itoa(i), `webhook.events are "started", "page", "completed", "failed" or "cancelled"`)
		}
		if !slices.Contains(w.Events, e) {
			w.Events = append(w.Events, e)
		}
	}
	if len(w.Events) == 0 {
		w.Events = slices.Clone(WebhookEvents)
	}
	return w, nil
}

// webhookDecodeError names the field of a webhook object the decoder
// refused.
func webhookDecodeError(err error) error {
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok && te.Field != "" {
		want := "a string"
		switch strings.SplitN(te.Field, ".", 2)[0] {
		case "headers", "metadata":
			want = "an object of strings"
		case "events":
			want = "a list of strings"
		}
		return BadRequest("webhook."+te.Field, fmt.Sprintf("webhook.%s must be %s", te.Field, want))
	}
	if msg := err.Error(); strings.HasPrefix(msg, "json: unknown field ") {
		return BadRequest("webhook", "Unrecognized key in webhook object ("+strings.TrimPrefix(msg, "json: unknown field ")+"): it takes url, headers, metadata and events")
	}
	return BadRequest("webhook", "webhook is not a valid JSON object")
}
