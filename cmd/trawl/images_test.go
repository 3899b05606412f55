package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The crawl server's gpu image (TRAWL_CRAWL_GPU=1) refuses to start on a
// machine without a GPU with the spec's message (docs/spec/crawl-server.md
// §7), before it opens anything; with a GPU it renders with it.
func TestCrawlGPUNotFound(t *testing.T) {
	saved := gpuDevices
	t.Cleanup(func() { gpuDevices = saved })
	gpuDevices = []string{filepath.Join(t.TempDir(), "nvidia0")}
	t.Setenv("TRAWL_CRAWL_GPU", "1")
	data := t.TempDir()
	err := runCrawl(context.Background(), []string{"--listen", "127.0.0.1:0", "--data", data}, io.Discard)
	if err == nil || !strings.HasPrefix(err.Error(), "GPU not found") {
		t.Fatalf("without a GPU: %v", err)
	}
	if entries, _ := os.ReadDir(data); len(entries) != 0 {
		t.Fatalf("it opened %d things in its data dir before refusing", len(entries))
	}
	// A device there is a GPU.
	if err := os.WriteFile(gpuDevices[0], nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if !gpuPresent() {
		t.Fatal("the device is not seen")
	}
}

func TestHealthProbe(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			http.NotFound(w, r)
		}
	}))
	defer ok.Close()
	if err := runHealth(context.Background(), []string{ok.URL + "/health"}); err != nil {
		t.Fatalf("healthy: %v", err)
	}
	if err := runHealth(context.Background(), []string{ok.URL + "/nope"}); err == nil {
		t.Fatal("a 404 is healthy")
	}
	if err := runHealth(context.Background(), nil); err == nil {
		t.Fatal("no URL")
	}
}
