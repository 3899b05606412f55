package gatetest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/trawlhq/trawl/ledger"
)

// keyTransport sends an API key with every request, as an MCP client
// configured with a header does.
type keyTransport struct {
	key    string
	header string // Authorization (default) or X-Api-Key
}

func (k keyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if k.header == "X-Api-Key" {
		r.Header.Set("X-Api-Key", k.key)
	} else {
		r.Header.Set("Authorization", "Bearer "+k.key)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// progressLog keeps the progress notifications a client received.
type progressLog struct {
	mu   sync.Mutex
	msgs []string
}

func (p *progressLog) add(m string) {
	p.mu.Lock()
	p.msgs = append(p.msgs, m)
	p.mu.Unlock()
}

func (p *progressLog) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.msgs)
}

// mcpClient connects the SDK's own client to the gate's /mcp with key.
func mcpClient(t *testing.T, g *Gate, key, header string) (*sdk.ClientSession, *progressLog) {
	t.Helper()
	pl := &progressLog{}
	c := sdk.NewClient(&sdk.Implementation{Name: "gatetest", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
			pl.add(r.Params.Message)
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: g.URL + "/mcp",
		HTTPClient: &http.Client{Transport: keyTransport{key: key, header: header}}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, pl
}

// tool calls a tool and returns its result and structured content.
func tool(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) (*sdk.CallToolResult, map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 130*time.Second)
	defer cancel()
	if args == nil {
		args = map[string]any{}
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args, Meta: sdk.Meta{"progressToken": name}})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var o map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatalf("%s: structured content %s: %v", name, b, err)
	}
	return res, o
}

func billingOf(t *testing.T, name string, res *sdk.CallToolResult, o map[string]any) map[string]any {
	t.Helper()
	b, ok := o["billing"].(map[string]any)
	if !ok {
		t.Fatalf("%s: no billing in %v", name, o)
	}
	for k, mk := range map[string]string{"cost": "trawl/cost", "balance": "trawl/balance", "receipt": "trawl/receipt", "region": "trawl/region"} {
		if b[k] != res.Meta[mk] {
			t.Errorf("%s: billing %s %v, _meta %s %v", name, k, b[k], mk, res.Meta[mk])
		}
	}
	return b
}

func TestMCPScrapeThroughThePipeline(t *testing.T) {
	g := Start(t, Options{})
	pages := site(t)
	key := g.Account(t, ledger.PlanFree, 100)
	cs, _ := mcpClient(t, g, key, "")

	res, o := tool(t, cs, "scrape", map[string]any{"url": pages.URL + "/a", "format": "md"})
	if res.IsError {
		t.Fatalf("scrape: %v", o)
	}
	if md, _ := o["markdown"].(string); !strings.Contains(md, "Page /a") {
		t.Fatalf("markdown: %v", o)
	}
	b := billingOf(t, "scrape", res, o)
	if b["cost"] != "1.000" || b["balance"] != "99.000" || b["region"] != "eu" || !strings.HasPrefix(fmt.Sprint(b["receipt"]), "r_eu_") {
		t.Fatalf("billing %v", b)
	}
}
