package recipespec

import "encoding/json"

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
	// MaxFileBytes bounds a body file (a module).
	MaxFileBytes = 16 << 20
	maxInputs    = 32
	maxOutputs   = 64
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
	// Rows is a json_css schema (internal/cssschema, the crawl server's
	// language: baseSelector, fields, baseFields; docs/crawl-server.md)
	// applied to every page.
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

// Input returns the named input.
func (m *Manifest) Input(name string) (*Input, bool) {
	for i := range m.Inputs {
		if m.Inputs[i].Name == name {
			return &m.Inputs[i], true
		}
	}
	return nil, false
}

// Secret reports whether the recipe has a secret input (it is never
// cached).
func (m *Manifest) Secret() bool {
	for _, in := range m.Inputs {
		if in.Secret {
			return true
		}
	}
	return false
}
