package recipe

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	crawlx "github.com/trawlhq/trawl/cell/crawl/extract"
)

// Kinds of recipe body.
const (
	KindJSON   = "json"
	KindModule = "module"
	KindScript = "script"
)

// Input types (docs/spec/hosted-api.md §2.7).
const (
	TypeString  = "string"
	TypeInteger = "integer"
	TypeBoolean = "boolean"
	TypeDate    = "date"
)

// Stages and health (§2.7, §3).
const (
	StagePublished = "published"
	StageStaged    = "staged"
	HealthOK       = "ok"
	HealthFail     = "fail"
	HealthUnknown  = "unknown"
)

// SessionInput is the name of the caller's session input: one Cookie
// header line, a secret.
const SessionInput = "session"

// Files of a recipe directory.
const (
	ManifestFile = "recipe.json"
	ScriptFile   = "script.js"
	ModuleFile   = "module.wasm"
)

// Bounds on a manifest.
const (
	MaxPageBudget = 500
	maxInputs     = 32
	maxOutputs    = 64
	maxBody       = 16 << 20 // a module
)

// Manifest describes a recipe (docs/recipes.md).
type Manifest struct {
	Name        string   `json:"name"`
	Version     int      `json:"version"`
	Title       string   `json:"title"`
	Description string   `json:"description"`
	Tags        []string `json:"tags,omitempty"`
	Kind        string   `json:"kind"`
	Inputs      []Input  `json:"inputs"`
	Outputs     []string `json:"outputs"`
	// FreshForS is how long a result is served from cache (0: never).
	FreshForS int `json:"fresh_for_s"`
	// Hosts are the hosts the recipe may fetch: "example.com" (any port),
	// "*.example.com" (its subdomains too), or "{input}" (the host of
	// that input's URL).
	Hosts []string `json:"hosts"`
	// PageBudget bounds the pages a run fetches (default 10).
	PageBudget int `json:"page_budget"`
	// Run is sync (default) or job.
	Run string `json:"run,omitempty"`
	// CostHint says what a run costs in units; default 1 to PageBudget.
	CostHint *CostHint `json:"cost_hint,omitempty"`
	// Health are the inputs of the 6-hourly check; none: the recipe's
	// health stays unknown and a staged recipe is never promoted.
	Health *HealthSpec `json:"health,omitempty"`
	// JSON is the declarative body of a json recipe.
	JSON *JSONBody `json:"json,omitempty"`
	// Limits bound a module or a script run.
	Limits *Limits `json:"limits,omitempty"`
}

// Input is one typed input.
type Input struct {
	Name        string          `json:"name"`
	Type        string          `json:"type"`
	Description string          `json:"description,omitempty"`
	Default     json.RawMessage `json:"default,omitempty"`
	Required    bool            `json:"required,omitempty"`
	// Secret inputs are never stored, logged or cached; a recipe with one
	// is never cached.
	Secret bool `json:"secret,omitempty"`
	// Need is required or optional, for the session input.
	Need string `json:"need,omitempty"`
}

// CostHint is a recipe's cost in units of a run.
type CostHint struct {
	MinUnits int    `json:"min_units"`
	MaxUnits int    `json:"max_units"`
	Text     string `json:"text,omitempty"`
}

// HealthSpec is what a health check runs.
type HealthSpec struct {
	Inputs map[string]json.RawMessage `json:"inputs"`
	// MinRows is how many rows a passing check returns (default 1).
	MinRows int `json:"min_rows,omitempty"`
}

// Limits bound a module or script run.
type Limits struct {
	// MemoryMiB bounds a module's linear memory, or a script's heap growth
	// (default 64 for scripts, 128 for modules).
	MemoryMiB int `json:"memory_mib,omitempty"`
	// TimeMS bounds the module's or script's own run time (default 60000;
	// never past the run's 300 s).
	TimeMS int `json:"time_ms,omitempty"`
}

// JSONBody is the declarative recipe: URL templates, a json_css schema
// for the rows, pagination and a join with detail pages.
type JSONBody struct {
	// URLs are the start pages: templates where {input} is replaced by
	// the input's value (query-escaped, or as it is when the template is
	// just "{input}").
	URLs []string `json:"urls"`
	// Rows is a json_css schema (the crawl server's language: baseSelector,
	// fields, baseFields; docs/crawl-server.md) applied to every page.
	Rows json.RawMessage `json:"rows"`
	// Next is a CSS selector whose first match's href is the next page;
	// pages are followed while the budget and MaxPages allow.
	Next string `json:"next,omitempty"`
	// MaxPages bounds the list pages followed (default: the budget).
	MaxPages int `json:"max_pages,omitempty"`
	// Detail joins each row with the page its Link field names: Fields
	// (json_css fields) are read from that page's root into the row.
	Detail *DetailSpec `json:"detail,omitempty"`
	// URLFields are output fields resolved against the page's URL.
	URLFields []string `json:"url_fields,omitempty"`
	// XML reads the pages as XML (sitemaps, feeds): element names lower
	// case, namespaces dropped. Default: by content type.
	XML *bool `json:"xml,omitempty"`
}

// DetailSpec is a join of list rows with their detail pages.
type DetailSpec struct {
	Link   string          `json:"link"`
	Fields json.RawMessage `json:"fields"`
}

// Recipe is a loaded, checked recipe.
type Recipe struct {
	Manifest
	// Script is a script recipe's source; Module a module's bytes.
	Script string
	Module []byte
	// Builtin: shipped in the binary.
	Builtin bool
	// Hash identifies the manifest and body: a change makes an operator
	// recipe staged again.
	Hash string
	// Dir is where an operator recipe was read from.
	Dir string

	rows   *crawlx.CSSSchema
	detail *crawlx.CSSFields
}

// Secret reports whether the recipe has a secret input (it is never
// cached).
func (r *Recipe) Secret() bool {
	for _, in := range r.Inputs {
		if in.Secret {
			return true
		}
	}
	return false
}

// input returns the named input.
func (r *Recipe) input(name string) (*Input, bool) {
	for i := range r.Inputs {
		if r.Inputs[i].Name == name {
			return &r.Inputs[i], true
		}
	}
	return nil, false
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
var fieldRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// LoadDir reads a recipe directory: recipe.json and, by kind, script.js
// or module.wasm.
func LoadDir(dir string) (*Recipe, error) {
	raw, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for _, f := range []string{ScriptFile, ModuleFile} {
		b, err := readCapped(filepath.Join(dir, f))
		if err == nil {
			files[f] = b
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	r, err := Parse(raw, files)
	if err != nil {
		return nil, fmt.Errorf("recipe %s: %w", dir, err)
	}
	r.Dir = dir
	return r, nil
}

func readCapped(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Size() > maxBody {
		return nil, fmt.Errorf("%s: over %d bytes", path, maxBody)
	}
	return os.ReadFile(path)
}

// Parse checks a manifest and its body files.
func Parse(manifest []byte, files map[string][]byte) (*Recipe, error) {
	dec := json.NewDecoder(bytes.NewReader(manifest))
	dec.DisallowUnknownFields()
	r := &Recipe{}
	if err := dec.Decode(&r.Manifest); err != nil {
		return nil, fmt.Errorf("%s: %w", ManifestFile, err)
	}
	m := &r.Manifest
	if !nameRE.MatchString(m.Name) {
		return nil, fmt.Errorf("name %q: want 1 to 63 of [a-z0-9-], starting with a letter or digit", m.Name)
	}
	if m.Name == "health" {
		return nil, errors.New(`name "health" is taken by GET /recipes/health`)
	}
	if m.Version < 1 {
		return nil, errors.New("version: an integer from 1")
	}
	if strings.TrimSpace(m.Title) == "" {
		return nil, errors.New("title is required")
	}
	if len(m.Inputs) > maxInputs {
		return nil, fmt.Errorf("at most %d inputs", maxInputs)
	}
	seen := map[string]bool{}
	for i := range m.Inputs {
		in := &m.Inputs[i]
		if !fieldRE.MatchString(in.Name) || in.Name == "bypass_cache" || seen[in.Name] {
			return nil, fmt.Errorf("inputs[%d]: name %q is not a usable input name (or repeated)", i, in.Name)
		}
		seen[in.Name] = true
		switch in.Type {
		case TypeString, TypeInteger, TypeBoolean, TypeDate:
		default:
			return nil, fmt.Errorf("inputs[%d] %s: type %q: want string, integer, boolean or date", i, in.Name, in.Type)
		}
		if in.Name == SessionInput {
			in.Secret = true
			if in.Type != TypeString {
				return nil, errors.New("the session input is a string (one Cookie header line)")
			}
			if in.Need == "" {
				in.Need = "optional"
				if in.Required {
					in.Need = "required"
				}
			}
			if in.Need != "optional" && in.Need != "required" {
				return nil, fmt.Errorf("inputs[%d] session: need is required or optional", i)
			}
			in.Required = in.Need == "required"
		} else if in.Need != "" {
			return nil, fmt.Errorf("inputs[%d] %s: need is for the session input", i, in.Name)
		}
		if in.Secret && len(in.Default) > 0 {
			return nil, fmt.Errorf("inputs[%d] %s: a secret input has no default", i, in.Name)
		}
		if len(in.Default) > 0 {
			if _, err := coerce(in, in.Default); err != nil {
				return nil, fmt.Errorf("inputs[%d] %s: default: %w", i, in.Name, err)
			}
		}
	}
	if len(m.Outputs) == 0 || len(m.Outputs) > maxOutputs {
		return nil, fmt.Errorf("outputs: 1 to %d field names", maxOutputs)
	}
	out := map[string]bool{}
	for _, o := range m.Outputs {
		if !fieldRE.MatchString(o) || out[o] {
			return nil, fmt.Errorf("outputs: %q is not a usable field name (or repeated)", o)
		}
		out[o] = true
	}
	if m.FreshForS < 0 {
		return nil, errors.New("fresh_for_s: not negative")
	}
	if len(m.Hosts) == 0 {
		return nil, errors.New("hosts: name the hosts the recipe may fetch")
	}
	for _, h := range m.Hosts {
		if name, ok := strings.CutPrefix(h, "{"); ok {
			name = strings.TrimSuffix(name, "}")
			if in, ok := r.input(name); !ok || in.Type != TypeString {
				return nil, fmt.Errorf("hosts: %q names no string input", h)
			}
			continue
		}
		if h == "" || strings.ContainsAny(h, "/:@ ") {
			return nil, fmt.Errorf("hosts: %q is not a host name", h)
		}
	}
	if m.PageBudget == 0 {
		m.PageBudget = 10
	}
	if m.PageBudget < 1 || m.PageBudget > MaxPageBudget {
		return nil, fmt.Errorf("page_budget: 1 to %d", MaxPageBudget)
	}
	switch m.Run {
	case "":
		m.Run = "sync"
	case "sync", "job":
	default:
		return nil, errors.New("run: sync or job")
	}
	if m.CostHint == nil {
		m.CostHint = &CostHint{MinUnits: 1, MaxUnits: m.PageBudget}
	}
	if m.CostHint.Text == "" {
		m.CostHint.Text = fmt.Sprintf("%d to %d units: one a page fetched plainly, more for pages that need the browser (docs/recipes.md)", m.CostHint.MinUnits, m.CostHint.MaxUnits)
	}
	if m.Health != nil {
		for k := range m.Health.Inputs {
			if _, ok := r.input(k); !ok {
				return nil, fmt.Errorf("health.inputs: %q is not an input", k)
			}
		}
		if m.Health.MinRows == 0 {
			m.Health.MinRows = 1
		}
	}
	if m.Limits == nil {
		m.Limits = &Limits{}
	}
	if m.Limits.TimeMS <= 0 {
		m.Limits.TimeMS = 60000
	}
	if m.Limits.MemoryMiB <= 0 {
		m.Limits.MemoryMiB = 64
		if m.Kind == KindModule {
			m.Limits.MemoryMiB = 128
		}
	}
	h := sha256.New()
	h.Write(manifest)
	switch m.Kind {
	case KindJSON:
		if m.JSON == nil {
			return nil, errors.New("a json recipe has a json body")
		}
		if err := r.compileJSON(); err != nil {
			return nil, err
		}
	case KindScript:
		src, ok := files[ScriptFile]
		if !ok || len(bytes.TrimSpace(src)) == 0 {
			return nil, errors.New("a script recipe has " + ScriptFile)
		}
		r.Script = string(src)
		h.Write(src)
	case KindModule:
		mod, ok := files[ModuleFile]
		if !ok || len(mod) == 0 {
			return nil, errors.New("a module recipe has " + ModuleFile)
		}
		r.Module = mod
		h.Write(mod)
	default:
		return nil, fmt.Errorf("kind %q: want json, module or script", m.Kind)
	}
	if m.Kind != KindJSON && m.JSON != nil {
		return nil, errors.New("only a json recipe has a json body")
	}
	r.Hash = hex.EncodeToString(h.Sum(nil)[:12])
	return r, nil
}

func (r *Recipe) compileJSON() error {
	b := r.JSON
	if len(b.URLs) == 0 {
		return errors.New("json.urls: at least one start page")
	}
	for _, u := range b.URLs {
		for _, name := range placeholders(u) {
			if _, ok := r.input(name); !ok {
				return fmt.Errorf("json.urls: %q names no input {%s}", u, name)
			}
		}
	}
	if len(b.Rows) == 0 {
		return errors.New("json.rows: a json_css schema is required")
	}
	s, err := crawlx.CompileCSS(b.Rows, "json.rows.")
	if err != nil {
		return err
	}
	r.rows = s
	if b.Detail != nil {
		if b.Detail.Link == "" {
			return errors.New("json.detail.link: the field holding the detail page's URL")
		}
		if r.detail, err = crawlx.CompileCSSFields(b.Detail.Fields, "json.detail.fields"); err != nil {
			return err
		}
	}
	if b.Next != "" {
		if _, err := compileSel(b.Next); err != nil {
			return fmt.Errorf("json.next: %w", err)
		}
	}
	if b.MaxPages < 0 {
		return errors.New("json.max_pages: not negative")
	}
	return nil
}

var placeholderRE = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)\}`)

func placeholders(s string) []string {
	var out []string
	for _, m := range placeholderRE.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}
