package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/trawlhq/trawl/cell"
	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/cell/recipe"
	"github.com/trawlhq/trawl/internal/recipespec"
)

// recipeFlags registers the cell's recipe flags (docs/recipes.md).
func recipeFlags(fs *flag.FlagSet, rc *cell.RecipeConfig) {
	fs.StringVar(&rc.Dir, "recipes", "", "the operator's recipe directory: one subdirectory per recipe, reloaded when it changes (default: built-ins only)")
	fs.DurationVar(&rc.CheckEvery, "recipe-check-every", recipe.DefaultCheckEvery, "how often each recipe's health inputs are checked (a staged recipe is published after two passing checks)")
	fs.DurationVar(&rc.CheckTick, "recipe-check-tick", time.Minute, "how often due health checks are looked for")
	fs.DurationVar(&rc.Timeout, "recipe-timeout", recipe.RunTimeout, "the longest a recipe run may take")
	fs.Var((*healthInputsFlag)(&rc.HealthInputs), "recipe-health", "health-check inputs of a recipe, NAME={json object} (repeatable; the built-ins ship none)")
}

// healthInputsFlag is --recipe-health NAME={"url":"…"}.
type healthInputsFlag map[string]map[string]json.RawMessage

func (h *healthInputsFlag) String() string {
	if h == nil || *h == nil {
		return ""
	}
	b, _ := json.Marshal(*h)
	return string(b)
}

// Set takes NAME={json}, or a JSON object of them all (what String
// gives, so trawl dev --regions can pass the flag on).
func (h *healthInputsFlag) Set(s string) error {
	if *h == nil {
		*h = map[string]map[string]json.RawMessage{}
	}
	if strings.HasPrefix(strings.TrimSpace(s), "{") {
		var all map[string]map[string]json.RawMessage
		if err := json.Unmarshal([]byte(s), &all); err != nil {
			return fmt.Errorf(`want NAME={"input":value,…} or {"NAME":{…},…}: %w`, err)
		}
		for k, v := range all {
			(*h)[k] = v
		}
		return nil
	}
	name, raw, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return errors.New(`want NAME={"input":value,…}`)
	}
	var in map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &in); err != nil {
		return fmt.Errorf("%s: the inputs are a JSON object: %w", name, err)
	}
	(*h)[name] = in
	return nil
}

const recipeUsage = `usage:
  trawl recipe run DIR|NAME [--input k=v ...] [--session COOKIE_LINE] [--allow-private-networks]
      run a recipe directory (or a built-in by name) on this machine, with plain
      HTTP fetches, and print its rows as JSON; warnings go to stderr
  trawl recipe new --kind json|module|script NAME
      write a working starting point in ./NAME
  trawl recipe list
      the built-in recipes
`

func runRecipeCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, recipeUsage)
		return flag.ErrHelp
	}
	switch args[0] {
	case "run":
		return recipeRun(ctx, args[1:], stdout, stderr)
	case "new":
		return recipeNew(args[1:], stdout, stderr)
	case "list":
		bs, err := recipe.Builtins()
		if err != nil {
			return err
		}
		for _, r := range bs {
			fmt.Fprintf(stdout, "%-14s %-7s %s\n", r.Name, r.Kind, r.Title)
		}
		return nil
	}
	fmt.Fprint(stderr, recipeUsage)
	return fmt.Errorf("unknown recipe command %q", args[0])
}

// inputsFlag is --input k=v, repeatable.
type inputsFlag []string

func (f *inputsFlag) String() string     { return strings.Join(*f, " ") }
func (f *inputsFlag) Set(s string) error { *f = append(*f, s); return nil }

// localFetcher fetches a local run's pages with the plain HTTP engine.
type localFetcher struct{ h *fetch.HTTP }

func (f localFetcher) Fetch(ctx context.Context, raw, session string) (*recipe.Fetched, error) {
	req := &fetch.Request{URL: raw}
	if session != "" {
		req.Header = http.Header{"Cookie": {session}}
	}
	resp, err := f.h.Fetch(ctx, req)
	if err != nil {
		return nil, err
	}
	return &recipe.Fetched{URL: resp.URL, Status: resp.Status, ContentType: resp.ContentType, Body: resp.Body, Engine: "http", Level: "light"}, nil
}

func recipeRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("recipe run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var inputs inputsFlag
	fs.Var(&inputs, "input", "an input, NAME=VALUE (repeatable); VALUE is read as the input's type")
	session := fs.String("session", "", "the session input: one Cookie header line (never printed)")
	private := fs.Bool("allow-private-networks", false, "let the run fetch loopback and private addresses (local sites under development)")
	timeout := fs.Duration("timeout", recipe.RunTimeout, "the longest the run may take")
	// Flags may follow the target.
	var target string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		target, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if target == "" && fs.NArg() > 0 {
		target = fs.Arg(0)
	}
	if target == "" {
		fmt.Fprint(stderr, recipeUsage)
		return errors.New("name a recipe directory or a built-in")
	}
	h := fetch.NewHTTP(fetch.HTTPConfig{AllowPrivateNetworks: *private})
	defer h.Close()
	cfg := recipe.Config{Fetcher: localFetcher{h}, Timeout: *timeout, Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	name := target
	if fi, err := os.Stat(target); err == nil && fi.IsDir() {
		rc, err := recipe.LoadDir(target)
		if err != nil {
			return err
		}
		cfg.Extra, cfg.NoBuiltins, name = []*recipe.Recipe{rc}, true, rc.Name
	}
	svc, err := recipe.New(cfg)
	if err != nil {
		return err
	}
	rc, ok := svc.Get(name)
	if !ok {
		return fmt.Errorf("%s: no recipe directory or built-in of that name", target)
	}
	body := map[string]json.RawMessage{}
	for _, kv := range inputs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("--input %q: want NAME=VALUE", kv)
		}
		body[k] = inputValue(rc, k, v)
	}
	if *session != "" {
		b, _ := json.Marshal(*session)
		body[recipespec.SessionInput] = b
	}
	_, vals, _, err := svc.Prepare(rc.Name, body)
	if err != nil {
		return err
	}
	res, err := svc.Run(ctx, rc, vals, true)
	if res != nil {
		for _, w := range res.Meta.Warnings {
			fmt.Fprintln(stderr, "warning:", w)
		}
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "%d rows, %d pages, %d units, %d ms\n", len(res.Rows), res.Meta.PagesFetched, res.Units, res.Meta.ElapsedMS)
	b, err := json.MarshalIndent(res.Answer(), "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", b)
	return err
}

// inputValue is VALUE as JSON of the input's type: strings as they are,
// other types as JSON text.
func inputValue(rc *recipe.Recipe, name, v string) json.RawMessage {
	for _, in := range rc.Inputs {
		if in.Name == name && in.Type != recipespec.TypeString && in.Type != recipespec.TypeDate {
			if json.Valid([]byte(v)) {
				return json.RawMessage(v)
			}
		}
	}
	b, _ := json.Marshal(v)
	return b
}

func recipeNew(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("recipe new", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kind := fs.String("kind", recipespec.KindJSON, "json, module or script")
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if name == "" && fs.NArg() > 0 {
		name = fs.Arg(0)
	}
	if name == "" {
		return errors.New("usage: trawl recipe new --kind json|module|script NAME")
	}
	dir := name
	name = filepath.Base(filepath.Clean(dir))
	files, ok := recipeTemplates(name)[*kind]
	if !ok {
		return fmt.Errorf("--kind %q: want json, module or script", *kind)
	}
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("%s exists already", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for f, body := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(body), 0o644); err != nil {
			return err
		}
	}
	if _, err := recipe.LoadDir(dir); err != nil && *kind != recipespec.KindModule {
		os.RemoveAll(dir)
		return fmt.Errorf("the new recipe does not load (is %q a usable name?): %w", name, err)
	}
	fmt.Fprintf(stdout, "wrote %s/ (a %s recipe)\n", dir, *kind)
	if *kind == recipespec.KindModule {
		fmt.Fprintf(stdout, "build it:  (cd %s && GOOS=wasip1 GOARCH=wasm go build -o module.wasm .)\n", dir)
		fmt.Fprintf(stdout, "           (in a checkout of trawl, or a module that requires github.com/trawlhq/trawl for its guest package)\n")
	}
	fmt.Fprintf(stdout, "run it:    trawl recipe run %s --input url=https://example.com/\n", dir)
	return nil
}

func recipeTemplates(name string) map[string]map[string]string {
	manifest := func(kind, outputs, extra string) string {
		return `{
  "name": "` + name + `",
  "version": 1,
  "title": "Headings of a page",
  "description": "Every h1, h2 and h3 of a page, in order.",
  "tags": ["example"],
  "kind": "` + kind + `",
  "inputs": [
    {"name": "url", "type": "string", "required": true, "description": "the page"}
  ],
  "outputs": ` + outputs + `,
  "fresh_for_s": 600,
  "hosts": ["{url}"],
  "page_budget": 1,
  "health": {"inputs": {"url": "https://example.com/"}, "min_rows": 1}` + extra + `
}
`
	}
	return map[string]map[string]string{
		recipespec.KindJSON: {recipespec.ManifestFile: manifest(recipespec.KindJSON, `["text", "id"]`, `,
  "json": {
    "urls": ["{url}"],
    "rows": {
      "baseSelector": "h1, h2, h3",
      "fields": [
        {"name": "text", "type": "text"},
        {"name": "id", "type": "attribute", "attribute": "id"}
      ]
    }
  }`)},
		recipespec.KindScript: {recipespec.ManifestFile: manifest(recipespec.KindScript, `["level", "text"]`, `,
  "limits": {"time_ms": 20000, "memory_mib": 64}`), recipespec.ScriptFile: `// run(input) returns the rows; fetch, select, extract, content, resolve,
// log and fail are the host API (docs/recipes.md).
function run(input) {
  const page = fetch(input.url);
  if (page.status >= 400) fail("the page answered HTTP " + page.status);
  return select(page, "h1, h2, h3").map(function (h) {
    return { level: Number(h.tag.substring(1)), text: h.text };
  });
}
`},
		recipespec.KindModule: {recipespec.ManifestFile: manifest(recipespec.KindModule, `["level", "text"]`, `,
  "limits": {"time_ms": 20000, "memory_mib": 128}`), "main.go": `// A recipe module: build with GOOS=wasip1 GOARCH=wasm go build -o module.wasm .
package main

import (
	"strconv"

	"github.com/trawlhq/trawl/cell/recipe/guest"
)

func main() {
	in, err := guest.Inputs()
	if err != nil {
		panic(err)
	}
	url, _ := in["url"].(string)
	page, err := guest.Fetch(url)
	if err != nil {
		return // the host has ended the run (host_refused, page_budget, ...)
	}
	if page.Status >= 400 {
		guest.Fail("the page answered HTTP " + strconv.Itoa(page.Status))
		return
	}
	heads, err := guest.Select(page.ID, "h1, h2, h3")
	if err != nil {
		panic(err)
	}
	for _, h := range heads {
		level, _ := strconv.Atoi(h.Tag[1:])
		guest.Emit(map[string]any{"level": level, "text": h.Text})
	}
}
`},
	}
}
