package recipe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"runtime/metrics"
	"strings"
	"time"

	"github.com/dop251/goja"

	"github.com/trawlhq/trawl/internal/httpjson"
)

// Interrupt reasons of a script.
const (
	stopTime   = "time"
	stopMemory = "memory"
	stopCtx    = "context"
)

// runScript runs a script recipe in goja: the script defines
// run(input) and returns an array of row objects; it reaches the web only
// through the host functions fetch, select, extract, resolve and log.
// Its own time is bounded by limits.time_ms and its heap growth by
// limits.memory_mib: the growth of the process's live heap during the
// run, sampled every 5 ms (an approximation: goja has no allocator
// bound); either ends the run with module_limit.
func (r *run) runScript(ctx context.Context) error {
	vm := goja.New()
	vm.SetFieldNameMapper(goja.TagFieldNameMapper("json", true))
	prog, err := goja.Compile(r.rc.Name+".js", r.rc.Script, true)
	if err != nil {
		return badModule("the script does not compile: %v", err)
	}
	r.installHost(ctx, vm)

	limit := time.Duration(r.rc.Limits.TimeMS) * time.Millisecond
	done := make(chan struct{})
	defer close(done)
	go watch(ctx, vm, limit, int64(r.rc.Limits.MemoryMiB)<<20, done)

	var rows goja.Value
	err = func() (err error) {
		defer func() {
			if v := recover(); v != nil {
				err = fmt.Errorf("script host panic: %v", v)
			}
		}()
		if _, err := vm.RunProgram(prog); err != nil {
			return err
		}
		fn, ok := goja.AssertFunction(vm.Get("run"))
		if !ok {
			return badModule("the script defines no function run(input)")
		}
		rows, err = fn(goja.Undefined(), vm.ToValue(r.publicInputs()))
		return err
	}()
	if f := r.fatalErr(); f != nil {
		return f
	}
	if ie, ok := errors.AsType[*goja.InterruptedError](err); ok {
		switch ie.Value() {
		case stopTime:
			return moduleLimit("the script ran past its limit of %d ms", r.rc.Limits.TimeMS)
		case stopMemory:
			return moduleLimit("the script's heap grew past its limit of %d MiB", r.rc.Limits.MemoryMiB)
		default:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return moduleLimit("the script was stopped")
		}
	}
	if e, ok := errors.AsType[*httpjson.HTTPError](err); ok {
		return e
	}
	if err != nil {
		return badModule("the script failed: %v", err)
	}
	return r.scriptRows(rows)
}

// watch interrupts vm at its time limit, when its heap grows past the
// limit, or when ctx ends.
func watch(ctx context.Context, vm *goja.Runtime, limit time.Duration, mem int64, done <-chan struct{}) {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	base := heapBytes()
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			vm.Interrupt(stopCtx)
			return
		case <-timer.C:
			vm.Interrupt(stopTime)
			return
		case <-tick.C:
			if heapBytes()-base > mem {
				vm.Interrupt(stopMemory)
				return
			}
		}
	}
}

// liveHeap is the heap the last GC found live: garbage between GCs does
// not count, so other requests' short-lived allocations rarely stop a
// script, and a script that keeps what it allocates is stopped within a
// GC cycle of passing its limit.
const liveHeap = "/gc/heap/live:bytes"

func heapBytes() int64 {
	s := make([]metrics.Sample, 1)
	s[0].Name = liveHeap
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}

// publicInputs are the inputs a script or module sees: every one but the
// secret ones, which only the host uses.
func (r *run) publicInputs() map[string]any {
	out := map[string]any{}
	for k, v := range r.vals {
		if in, ok := r.rc.Input(k); ok && in.Secret {
			continue
		}
		out[k] = v
	}
	return out
}

// nodeID reads a page or element argument: the object's id, or a number.
func nodeID(vm *goja.Runtime, v goja.Value) (int, error) {
	if o, ok := v.(*goja.Object); ok {
		if id := o.Get("id"); id != nil && !goja.IsUndefined(id) {
			return int(id.ToInteger()), nil
		}
	}
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return 0, errors.New("a page or element is required")
	}
	return int(v.ToInteger()), nil
}

func (r *run) installHost(ctx context.Context, vm *goja.Runtime) {
	throw := func(err error) {
		panic(vm.NewGoError(err))
	}
	vm.Set("fetch", func(raw string) map[string]any {
		id, p, status, err := r.fetch(ctx, raw)
		if err != nil {
			if r.fatalErr() != nil {
				vm.Interrupt("fatal") // the run is over, whatever the script catches
			}
			throw(err)
		}
		return pageMap(id, p, status)
	})
	vm.Set("select", func(of goja.Value, css string) []map[string]any {
		id, err := nodeID(vm, of)
		if err != nil {
			throw(err)
		}
		els, err := r.selectAll(id, css)
		if err != nil {
			throw(err)
		}
		out := make([]map[string]any, len(els))
		for i, e := range els {
			out[i] = map[string]any{"id": e.ID, "tag": e.Tag, "text": e.Text, "attrs": e.Attrs}
		}
		return out
	})
	vm.Set("extract", func(of goja.Value, schema goja.Value) any {
		id, err := nodeID(vm, of)
		if err != nil {
			throw(err)
		}
		raw, err := json.Marshal(schema.Export())
		if err != nil {
			throw(err)
		}
		data, err := r.extractFrom(ctx, id, raw)
		if err != nil {
			throw(err)
		}
		// Through JSON, so ordered objects become plain ones.
		b, _ := json.Marshal(data)
		var v any
		_ = json.Unmarshal(b, &v)
		return v
	})
	vm.Set("content", func(of goja.Value) map[string]any {
		id, err := nodeID(vm, of)
		if err != nil {
			throw(err)
		}
		c, err := r.mainContent(id)
		if err != nil {
			throw(err)
		}
		return map[string]any{"title": c.Title, "markdown": c.Markdown}
	})
	vm.Set("fail", func(msg string) {
		r.setFatal(fetchFailed("%s", msg))
		vm.Interrupt("fatal")
		throw(errors.New(msg))
	})
	vm.Set("resolve", func(base, ref string) string {
		b, err := url.Parse(base)
		if err != nil {
			return ref
		}
		u, err := b.Parse(strings.TrimSpace(ref))
		if err != nil {
			return ref
		}
		return u.String()
	})
	vm.Set("log", func(call goja.FunctionCall) goja.Value {
		parts := make([]string, len(call.Arguments))
		for i, a := range call.Arguments {
			parts[i] = a.String()
		}
		r.warn("log: " + strings.Join(parts, " "))
		return goja.Undefined()
	})
}

func pageMap(id int, p *pageRec, status int) map[string]any {
	return map[string]any{"id": id, "url": p.url, "status": status, "content_type": p.ctype, "text": string(p.body)}
}

// scriptRows reads the array run returned.
func (r *run) scriptRows(v goja.Value) error {
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return badModule("run(input) returned nothing; it returns an array of row objects")
	}
	b, err := json.Marshal(v.Export())
	if err != nil {
		return badModule("run(input) returned what is not JSON: %v", err)
	}
	return r.rowsFromJSON(b)
}

func (r *run) rowsFromJSON(b []byte) error {
	var objs []map[string]any
	if err := json.Unmarshal(b, &objs); err != nil {
		return badModule("the rows are not an array of objects")
	}
	return r.addRows(objs)
}
