//go:build wasip1

// Package guest is the host API of trawl's recipe modules, for modules
// written in Go (docs/recipes.md): build the recipe's main package with
//
//	GOOS=wasip1 GOARCH=wasm go build -o module.wasm .
//
// and put module.wasm beside recipe.json. Every function is one JSON call
// to the host module "trawl" (call, result); the host keeps the run to the
// recipe's allowed hosts and page budget, and sends the caller's session
// with its fetches (the module never sees it).
package guest

import (
	"encoding/json"
	"fmt"
	"unsafe"
)

//go:wasmimport trawl call
func hostCall(ptr unsafe.Pointer, n uint32) uint32

//go:wasmimport trawl result
func hostResult(ptr unsafe.Pointer)

// Error is a host call's refusal: host_refused, page_budget, fetch_failed,
// bad_session and the like. The run has failed when the host says so,
// whatever the module does next.
type Error struct {
	Code    string `json:"error"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func call(req map[string]any, out any) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	n := hostCall(unsafe.Pointer(&b[0]), uint32(len(b)))
	ans := make([]byte, n)
	if n > 0 {
		hostResult(unsafe.Pointer(&ans[0]))
	}
	var env struct {
		OK json.RawMessage `json:"ok"`
		Error
	}
	if err := json.Unmarshal(ans, &env); err != nil {
		return fmt.Errorf("host answer: %w", err)
	}
	if env.Code != "" {
		return &env.Error
	}
	if out != nil {
		return json.Unmarshal(env.OK, out)
	}
	return nil
}

// Inputs are the run's inputs (without secret ones).
func Inputs() (map[string]any, error) {
	var in map[string]any
	err := call(map[string]any{"op": "input"}, &in)
	return in, err
}

// Page is a fetched page.
type Page struct {
	ID          int    `json:"id"`
	URL         string `json:"url"`
	Status      int    `json:"status"`
	ContentType string `json:"content_type"`
	Text        string `json:"text"`
}

// Fetch fetches a page of an allowed host, counted against the budget.
func Fetch(url string) (*Page, error) {
	var p Page
	if err := call(map[string]any{"op": "fetch", "url": url}, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Element is an element select matched.
type Element struct {
	ID    int               `json:"id"`
	Tag   string            `json:"tag"`
	Text  string            `json:"text"`
	Attrs map[string]string `json:"attrs"`
}

// Select matches a CSS selector under a page or an element (its ID).
func Select(id int, css string) ([]Element, error) {
	var els []Element
	err := call(map[string]any{"op": "select", "id": id, "css": css}, &els)
	return els, err
}

// Extract fills a JSON schema from a fetched page (the extract service's
// extractor).
func Extract(id int, schema any) (any, error) {
	var v any
	err := call(map[string]any{"op": "extract", "id": id, "schema": schema}, &v)
	return v, err
}

// Content is a page's main content: its title and Markdown.
func Content(id int) (title, markdown string, err error) {
	var c struct{ Title, Markdown string }
	err = call(map[string]any{"op": "content", "id": id}, &c)
	return c.Title, c.Markdown, err
}

// Log adds a line to the run's meta.warnings.
func Log(format string, a ...any) {
	_ = call(map[string]any{"op": "log", "text": fmt.Sprintf(format, a...)}, nil)
}

// Emit adds rows to the result; only the recipe's output fields are kept.
func Emit(rows ...map[string]any) error {
	return call(map[string]any{"op": "emit", "rows": rows}, nil)
}

// Fail ends the run with fetch_failed and message.
func Fail(message string) error {
	return call(map[string]any{"op": "fail", "text": message}, nil)
}
