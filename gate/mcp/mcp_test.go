package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// A call the gate takes 100 s to answer (a browser page may take 90 s) is
// not cut: the tool server has no deadline of its own, and while it waits
// it sends a progress notification every ProgressEvery to a client that
// asked for them, so a client that resets its timeout on progress keeps
// waiting. The gate here is a handler standing in for the pipeline; fake
// time (synctest) makes the 100 s instant.
func TestLongCallSendsProgressAndIsNotCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/scrape" || r.Header.Get("Content-Type") != "application/json" {
				http.Error(w, "unexpected "+r.URL.Path, 500)
				return
			}
			time.Sleep(100 * time.Second)
			w.Header().Set("X-Svc-Cost", "5.000")
			w.Header().Set("X-Svc-Balance", "95.000")
			w.Header().Set("X-Svc-Receipt", "r_eu_000000000000000000000001")
			w.Header().Set("X-Svc-Region", "eu")
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"ok":true,"markdown":"# slow"}`))
		})
		srv := NewServer(Config{Region: "eu", Pipeline: func(context.Context) http.Handler { return gate }})
		var mu sync.Mutex
		var notes []string
		client := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, &sdk.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
				mu.Lock()
				notes = append(notes, r.Params.Message)
				mu.Unlock()
			},
		})
		st, ct := sdk.NewInMemoryTransports()
		ctx := context.Background()
		ss, err := srv.Connect(ctx, st, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ss.Close()
		cs, err := client.Connect(ctx, ct, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		start := time.Now()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "scrape", Arguments: map[string]any{"url": "https://example.org/slow"}, Meta: sdk.Meta{"progressToken": "p"}})
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took < 100*time.Second {
			t.Errorf("answered after %v", took)
		}
		var o map[string]any
		b, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(b, &o)
		if res.IsError || o["markdown"] != "# slow" || res.Meta[MetaCost] != "5.000" || res.Meta[MetaReceipt] != "r_eu_000000000000000000000001" {
			t.Fatalf("result %v %v", o, res.Meta)
		}
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		// 10, 20, ... 90 s, and 100 s when the answer and the tick meet.
		if len(notes) < 9 || !strings.Contains(notes[0], "scrape: still working after 10 s") {
			t.Errorf("progress: %q", notes)
		}
	})
}

// Outside a gate (no pipeline) a tool answers a tool error, not a hang.
func TestNoPipeline(t *testing.T) {
	srv := NewServer(Config{})
	st, ct := sdk.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "balance"})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, "not running inside a gate") {
		t.Fatalf("%v %+v", err, res)
	}
}
