package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/trawlhq/trawl/internal/routes"
)

// runMCP is "trawl mcp": a stdio bridge to a gate's /mcp, for MCP clients
// that only start local commands. It relays every JSON-RPC message as it
// is, in both directions, between its stdin/stdout (the SDK's stdio
// transport) and the gate (the SDK's streamable HTTP client transport) with
// the key in the Authorization header: the tools, their progress
// notifications and their results are the gate's own.
func runMCP(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer, stderr io.Writer) error {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	gateURL := fs.String("url", "http://127.0.0.1:8080", "the gate (its /mcp is the tool server); a URL ending in /mcp is taken as it is")
	key := fs.String("key", os.Getenv("TRAWL_API_KEY"), "the API key (default $TRAWL_API_KEY)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *key == "" {
		return errors.New("no API key (--key or $TRAWL_API_KEY)")
	}
	endpoint := strings.TrimSuffix(*gateURL, "/")
	if !strings.HasSuffix(endpoint, "/mcp") {
		endpoint += "/mcp"
	}
	local, err := (&sdk.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}, MaxLineLength: routes.MCPBody}).Connect(ctx)
	if err != nil {
		return err
	}
	defer local.Close()
	remote, err := (&sdk.StreamableClientTransport{
		Endpoint:   endpoint,
		HTTPClient: &http.Client{Transport: bearer{key: *key, base: http.DefaultTransport}},
		// The gate's tool server is stateless: it has no stream of its own
		// to open (GET answers 405).
		DisableStandaloneSSE: true,
	}).Connect(ctx)
	if err != nil {
		return err
	}
	defer remote.Close()

	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		// The client is gone (stdin closed) or the gate is: stop both
		// directions, then wait for them.
		cancel()
		wg.Wait()
	}()
	// The gate's messages to the client.
	wg.Go(func() {
		defer cancel()
		for {
			msg, err := remote.Read(ctx)
			if err != nil {
				return
			}
			if err := local.Write(ctx, msg); err != nil {
				return
			}
		}
	})
	// The client's messages to the gate, each on its own: a long tool call
	// does not hold up the next one.
	for {
		msg, err := local.Read(ctx)
		if err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return nil
			}
			return err
		}
		wg.Go(func() {
			if err := remote.Write(ctx, msg); err != nil && ctx.Err() == nil {
				fmt.Fprintf(stderr, "trawl mcp: %v\n", err)
				// A call the gate refused (a bad key: 401) gets an error
				// answer, so the client does not wait for one forever.
				if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
					local.Write(ctx, &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: -32603, Message: "trawl mcp: the gate refused the request: " + err.Error()}})
				}
			}
		})
	}
}

type bearer struct {
	key  string
	base http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	r.Header.Set("User-Agent", "trawl-mcp-bridge")
	return b.base.RoundTrip(r)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
