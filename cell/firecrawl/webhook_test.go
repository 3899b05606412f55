package firecrawl

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseWebhook(t *testing.T) {
	all := []string{"started", "page", "completed", "failed", "cancelled"}
	for _, tt := range []struct {
		name, raw    string
		allowPrivate bool
		want         *Webhook
		path         string // of the refusal
	}{
		{"absent", ``, false, nil, ""},
		{"null", `null`, false, nil, ""},
		{"a URL", `"https://hooks.example/x?k=v"`, false, &Webhook{URL: "https://hooks.example/x?k=v", Metadata: map[string]string{}, Events: all}, ""},
		{"an object", `{"url":"https://hooks.example/x","headers":{"X-Token":"t"},"metadata":{"a":"b"},"events":["page","completed","page"]}`, false,
			&Webhook{URL: "https://hooks.example/x", Headers: map[string]string{"X-Token": "t"}, Metadata: map[string]string{"a": "b"}, Events: []string{"page", "completed"}}, ""},
		{"no events is all", `{"url":"https://hooks.example/x","events":[]}`, false, &Webhook{URL: "https://hooks.example/x", Metadata: map[string]string{}, Events: all}, ""},
		{"trawl's cancelled", `{"url":"https://hooks.example/x","events":["cancelled"]}`, false, &Webhook{URL: "https://hooks.example/x", Metadata: map[string]string{}, Events: []string{"cancelled"}}, ""},
		{"loopback, guarded", `"http://127.0.0.1:8080/x"`, false, nil, "webhook.url"},
		{"private, guarded", `{"url":"http://10.1.2.3/x"}`, false, nil, "webhook.url"},
		{"loopback, private networks allowed", `"http://127.0.0.1:8080/x"`, true, &Webhook{URL: "http://127.0.0.1:8080/x", Metadata: map[string]string{}, Events: all}, ""},
		{"ftp", `"ftp://hooks.example/"`, false, nil, "webhook.url"},
		{"empty url", `{"url":""}`, false, nil, "webhook.url"},
		{"url a number", `{"url":1}`, false, nil, "webhook.url"},
		{"a list", `["https://hooks.example/x"]`, false, nil, "webhook"},
		{"unknown key", `{"url":"https://hooks.example/x","secret":"mine"}`, false, nil, "webhook"},
		{"unknown event", `{"url":"https://hooks.example/x","events":["done"]}`, false, nil, "webhook.events.0"},
		{"headers a list", `{"url":"https://hooks.example/x","headers":["a"]}`, false, nil, "webhook.headers"},
		{"signature header", `{"url":"https://hooks.example/x","headers":{"X-FIRECRAWL-SIGNATURE":"x"}}`, false, nil, "webhook.headers"},
		{"svc header", `{"url":"https://hooks.example/x","headers":{"x-svc-timestamp":"1"}}`, false, nil, "webhook.headers"},
		{"host header", `{"url":"https://hooks.example/x","headers":{"Host":"other"}}`, false, nil, "webhook.headers"},
		{"header with a newline", `{"url":"https://hooks.example/x","headers":{"X-A":"1\r\nX-B: 2"}}`, false, nil, "webhook.headers"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseWebhook(json.RawMessage(tt.raw), tt.allowPrivate)
			if tt.path != "" {
				fe, ok := errors.AsType[*Error](err)
				if !ok || fe.Status != 400 || fe.Code != CodeBadRequest {
					t.Fatalf("ParseWebhook(%s) = %+v, %v; want a 400", tt.raw, got, err)
				}
				d := fe.Details.([]map[string]any)
				if p := strings.Join(d[0]["path"].([]string), "."); p != tt.path {
					t.Errorf("path %q, want %q (%s)", p, tt.path, fe.Message)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParseWebhook(%s) = %+v, %v; want %+v", tt.raw, got, err, tt.want)
			}
		})
	}
}

func TestWebhookWants(t *testing.T) {
	w := &Webhook{Events: []string{"failed", "page"}}
	for ev, want := range map[string]bool{"page": true, "failed": true, "cancelled": true, "started": false, "completed": false} {
		if w.Wants(ev) != want {
			t.Errorf("Wants(%s) = %v", ev, !want)
		}
	}
	if (&Webhook{Events: []string{"completed"}}).Wants("cancelled") || !(&Webhook{}).Wants("started") || (*Webhook)(nil).Wants("page") {
		t.Error("Wants of completed only, of no events, of nil")
	}
}
