package telemetry

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// The metrics endpoint answers no stranger: beyond loopback it needs a
// token, and with a token every scrape must carry it.
func TestMetricsEndpointIsGuarded(t *testing.T) {
	t.Setenv(EnvMetricsToken, "")
	if _, err := SetupMetrics(context.Background(), "0.0.0.0:0", slog.Default()); err == nil || !strings.Contains(err.Error(), EnvMetricsToken) {
		t.Fatalf("beyond loopback without a token: %v", err)
	}
	t.Setenv(EnvMetricsToken, "s3cret")
	m, err := SetupMetrics(context.Background(), "127.0.0.1:0", slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(context.Background())
	get := func(auth string) (int, string) {
		req, _ := http.NewRequest("GET", "http://"+m.Addr+"/metrics", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(""); code != 401 || !strings.Contains(body, `"unauthorized"`) {
		t.Fatalf("no token: %d %s", code, body)
	}
	if code, _ := get("Bearer nope"); code != 401 {
		t.Fatalf("wrong token: %d", code)
	}
	if code, body := get("Bearer s3cret"); code != 200 || !strings.Contains(body, "# HELP") {
		t.Fatalf("with the token: %d %.200s", code, body)
	}
}
