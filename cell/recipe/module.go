package recipe

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/trawlhq/trawl/internal/httpjson"
)

// HostModule is the import module of the host API a recipe module calls
// (docs/recipes.md): call(ptr, len) -> n sends one JSON request and
// returns the length of the answer, result(ptr) copies that answer in.
const HostModule = "trawl"

// maxHostRequest bounds one JSON request from a module.
const maxHostRequest = 16 << 20

// compiled keeps each module's compiled code (by the recipe's hash) for
// every run of it; a module no longer in the catalog is dropped when the
// catalog is reloaded (prune), so a changed module does not leave its old
// code behind.
type compiled struct {
	mu     sync.Mutex
	caches map[string]wazero.CompilationCache
}

func (c *compiled) get(hash string) wazero.CompilationCache {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.caches == nil {
		c.caches = map[string]wazero.CompilationCache{}
	}
	cc, ok := c.caches[hash]
	if !ok {
		cc = wazero.NewCompilationCache()
		c.caches[hash] = cc
	}
	return cc
}

// prune forgets the caches of modules not in keep. They are not closed:
// a run of the old module may still be using its code, which wazero
// unmaps once nothing refers to it (a finalizer).
func (c *compiled) prune(keep map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for h := range c.caches {
		if !keep[h] {
			delete(c.caches, h)
		}
	}
}

// hostRequest is one call of a module.
type hostRequest struct {
	Op     string          `json:"op"`
	URL    string          `json:"url,omitempty"`
	ID     int             `json:"id,omitempty"`
	CSS    string          `json:"css,omitempty"`
	Schema json.RawMessage `json:"schema,omitempty"`
	Text   string          `json:"text,omitempty"`
	Rows   json.RawMessage `json:"rows,omitempty"`
}

// limitedBuffer keeps the first n bytes written.
type limitedBuffer struct {
	bytes.Buffer
	n int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.n - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// runModule runs a module recipe: a WASI command (its _start, e.g. a Go
// main built with GOOS=wasip1 GOARCH=wasm) in wazero, with its linear
// memory bounded by limits.memory_mib and its run by limits.time_ms;
// passing either is module_limit, a module that does not compile or
// link is bad_module. It reaches the web only through the host module.
func (r *run) runModule(ctx context.Context) error {
	pages := uint32(r.rc.Limits.MemoryMiB) * 16 // 64 KiB pages
	cfg := wazero.NewRuntimeConfig().
		WithCompilationCache(r.modules.get(r.rc.Hash)).
		WithMemoryLimitPages(pages).
		WithCloseOnContextDone(true)
	// Compiling (once per module, then cached) is not the module's time:
	// only its run counts against limits.time_ms.
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	defer rt.Close(context.Background())
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		return fmt.Errorf("module: wasi: %w", err)
	}
	var last []byte
	_, err := rt.NewHostModuleBuilder(HostModule).
		NewFunctionBuilder().WithFunc(func(ctx context.Context, m api.Module, ptr, n uint32) uint32 {
		if n > maxHostRequest {
			last = hostError(moduleLimit("a host request over %d bytes", maxHostRequest))
			return uint32(len(last))
		}
		req, ok := m.Memory().Read(ptr, n)
		if !ok {
			last = hostError(badModule("a host request outside the module's memory"))
			return uint32(len(last))
		}
		last = r.hostCall(ctx, append([]byte(nil), req...))
		return uint32(len(last))
	}).Export("call").
		NewFunctionBuilder().WithFunc(func(ctx context.Context, m api.Module, ptr uint32) {
		m.Memory().Write(ptr, last)
	}).Export("result").
		Instantiate(ctx)
	if err != nil {
		return fmt.Errorf("module: host: %w", err)
	}
	compiled, err := rt.CompileModule(ctx, r.rc.Module)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return badModule("the module does not compile: %v", err)
	}
	var stderr limitedBuffer
	stderr.n = 4096
	mcfg := wazero.NewModuleConfig().WithStderr(&stderr).WithStdout(&stderr).WithName("").
		WithSysWalltime().WithSysNanotime().WithRandSource(rand.Reader)
	mctx, cancel := context.WithTimeout(ctx, time.Duration(r.rc.Limits.TimeMS)*time.Millisecond)
	defer cancel()
	mod, err := rt.InstantiateModule(mctx, compiled, mcfg)
	if mod != nil {
		defer mod.Close(context.Background())
	}
	if f := r.fatalErr(); f != nil {
		return f
	}
	if err == nil {
		return nil
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		switch exit.ExitCode() {
		case 0:
			return nil
		case sys.ExitCodeDeadlineExceeded, sys.ExitCodeContextCanceled:
			return r.moduleStopped(ctx, mctx)
		}
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "out of memory") {
			return moduleLimit("the module ran out of its %d MiB of memory", r.rc.Limits.MemoryMiB)
		}
		return badModule("the module exited with code %d: %s", exit.ExitCode(), msg)
	}
	if mctx.Err() != nil {
		return r.moduleStopped(ctx, mctx)
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "memory"):
		return moduleLimit("the module needs more than its %d MiB of memory: %v", r.rc.Limits.MemoryMiB, err)
	case strings.Contains(msg, "not instantiated"), strings.Contains(msg, "import"), strings.Contains(msg, "_start"):
		return badModule("the module cannot run here: %v", err)
	}
	return badModule("the module failed: %v", err)
}

// moduleStopped is the error of a module whose context ended: the run's
// (timeout) or the module's own limit.
func (r *run) moduleStopped(run, mod context.Context) error {
	if run.Err() != nil {
		return run.Err()
	}
	return moduleLimit("the module ran past its limit of %d ms", r.rc.Limits.TimeMS)
}

func hostError(e *httpjson.HTTPError) []byte {
	b, _ := json.Marshal(e.Body())
	return b
}

func hostOK(v any) []byte {
	b, err := json.Marshal(map[string]any{"ok": v})
	if err != nil {
		return hostError(badModule("host answer: %v", err))
	}
	return b
}

// hostCall answers one request of a module.
func (r *run) hostCall(ctx context.Context, raw []byte) []byte {
	var req hostRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		return hostError(badModule("a host request is not JSON: %v", err))
	}
	asErr := func(err error) []byte {
		if e, ok := errors.AsType[*httpjson.HTTPError](err); ok {
			return hostError(e)
		}
		if errors.Is(err, errBadSession) {
			return hostError(&httpjson.HTTPError{Code: "bad_session", Message: "the site refused the session"})
		}
		return hostError(&httpjson.HTTPError{Code: "error", Message: err.Error()})
	}
	switch req.Op {
	case "input":
		return hostOK(r.publicInputs())
	case "fetch":
		id, p, status, err := r.fetch(ctx, req.URL)
		if err != nil {
			return asErr(err)
		}
		return hostOK(pageInfo{ID: id, URL: p.url, Status: status, ContentType: p.ctype, Text: string(p.body)})
	case "select":
		els, err := r.selectAll(req.ID, req.CSS)
		if err != nil {
			return asErr(err)
		}
		return hostOK(els)
	case "extract":
		data, err := r.extractFrom(ctx, req.ID, req.Schema)
		if err != nil {
			return asErr(err)
		}
		return hostOK(data)
	case "content":
		c, err := r.mainContent(req.ID)
		if err != nil {
			return asErr(err)
		}
		return hostOK(c)
	case "fail":
		return asErr(r.setFatal(fetchFailed("%s", req.Text)))
	case "log":
		r.warn("log: " + req.Text)
		return hostOK(true)
	case "emit":
		if err := r.rowsFromJSON(req.Rows); err != nil {
			return asErr(err)
		}
		return hostOK(true)
	}
	return hostError(badModule("unknown host op %q (input, fetch, select, extract, content, fail, log, emit)", req.Op))
}
