package recipespec

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/trawlhq/trawl/internal/cssschema"
)

// Recipe is a checked recipe: its manifest with the defaults filled in,
// its body, and a json recipe's compiled schemas.
type Recipe struct {
	Manifest
	// Script is a script recipe's source; Module a module's bytes.
	Script string
	Module []byte
	// Hash identifies the manifest and body: a change makes an operator
	// recipe staged again.
	Hash string
	// Rows and Detail are a json recipe's compiled json.rows and
	// json.detail.fields (nil for the other kinds, Detail without a join).
	Rows   *cssschema.Schema
	Detail *cssschema.Fields
}

var (
	nameRE        = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	fieldRE       = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
	placeholderRE = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)\}`)
)

// Parse checks a manifest (recipe.json) and its body files (by name:
// ScriptFile, ModuleFile) and fills in the defaults. The error says what
// is wrong, naming the field.
func Parse(manifest []byte, files map[string][]byte) (*Recipe, error) {
	r := &Recipe{}
	dec := json.NewDecoder(bytes.NewReader(manifest))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r.Manifest); err != nil {
		return nil, fmt.Errorf("%s: %w", ManifestFile, err)
	}
	m := &r.Manifest
	for _, check := range []func(*Manifest) error{checkIdentity, checkInputs, checkOutputs, checkHosts, checkRun} {
		if err := check(m); err != nil {
			return nil, err
		}
	}
	fillDefaults(m)
	if err := r.readBody(manifest, files); err != nil {
		return nil, err
	}
	return r, nil
}

// checkIdentity: the name, version and title.
func checkIdentity(m *Manifest) error {
	if !nameRE.MatchString(m.Name) {
		return fmt.Errorf("name %q: want 1 to 63 of [a-z0-9-], starting with a letter or digit", m.Name)
	}
	if m.Name == "health" {
		return errors.New(`name "health" is taken by GET /recipes/health`)
	}
	if m.Version < 1 {
		return errors.New("version: an integer from 1")
	}
	if strings.TrimSpace(m.Title) == "" {
		return errors.New("title is required")
	}
	return nil
}

// checkInputs: names, types, the session input and defaults.
func checkInputs(m *Manifest) error {
	if len(m.Inputs) > maxInputs {
		return fmt.Errorf("at most %d inputs", maxInputs)
	}
	seen := map[string]bool{}
	for i := range m.Inputs {
		in := &m.Inputs[i]
		if !fieldRE.MatchString(in.Name) || in.Name == "bypass_cache" || seen[in.Name] {
			return fmt.Errorf("inputs[%d]: name %q is not a usable input name (or repeated)", i, in.Name)
		}
		seen[in.Name] = true
		switch in.Type {
		case TypeString, TypeInteger, TypeBoolean, TypeDate:
		default:
			return fmt.Errorf("inputs[%d] %s: type %q: want string, integer, boolean or date", i, in.Name, in.Type)
		}
		if in.Name == SessionInput {
			if err := checkSession(i, in); err != nil {
				return err
			}
		} else if in.Need != "" {
			return fmt.Errorf("inputs[%d] %s: need is for the session input", i, in.Name)
		}
		if in.Secret && len(in.Default) > 0 {
			return fmt.Errorf("inputs[%d] %s: a secret input has no default", i, in.Name)
		}
		if len(in.Default) > 0 {
			if _, err := Coerce(in, in.Default); err != nil {
				return fmt.Errorf("inputs[%d] %s: default: %w", i, in.Name, err)
			}
		}
	}
	return nil
}

// checkSession: the session input (inputs[i]) is a secret string, needed
// or optional.
func checkSession(i int, in *Input) error {
	in.Secret = true
	if in.Type != TypeString {
		return errors.New("the session input is a string (one Cookie header line)")
	}
	if in.Need == "" {
		in.Need = "optional"
		if in.Required {
			in.Need = "required"
		}
	}
	if in.Need != "optional" && in.Need != "required" {
		return fmt.Errorf("inputs[%d] session: need is required or optional", i)
	}
	in.Required = in.Need == "required"
	return nil
}

// checkOutputs: the output field names, and how long a result is fresh.
func checkOutputs(m *Manifest) error {
	if len(m.Outputs) == 0 || len(m.Outputs) > maxOutputs {
		return fmt.Errorf("outputs: 1 to %d field names", maxOutputs)
	}
	out := map[string]bool{}
	for _, o := range m.Outputs {
		if !fieldRE.MatchString(o) || out[o] {
			return fmt.Errorf("outputs: %q is not a usable field name (or repeated)", o)
		}
		out[o] = true
	}
	if m.FreshForS < 0 {
		return errors.New("fresh_for_s: not negative")
	}
	return nil
}

// checkHosts: host names, or {input} naming a string input.
func checkHosts(m *Manifest) error {
	if len(m.Hosts) == 0 {
		return errors.New("hosts: name the hosts the recipe may fetch")
	}
	for _, h := range m.Hosts {
		if name, ok := strings.CutPrefix(h, "{"); ok {
			name = strings.TrimSuffix(name, "}")
			if in, ok := m.Input(name); !ok || in.Type != TypeString {
				return fmt.Errorf("hosts: %q names no string input", h)
			}
			continue
		}
		if h == "" || strings.ContainsAny(h, "/:@ ") {
			return fmt.Errorf("hosts: %q is not a host name", h)
		}
	}
	return nil
}

// checkRun: the page budget, the run mode and the health check's inputs.
func checkRun(m *Manifest) error {
	if m.PageBudget == 0 {
		m.PageBudget = 10
	}
	if m.PageBudget < 1 || m.PageBudget > MaxPageBudget {
		return fmt.Errorf("page_budget: 1 to %d", MaxPageBudget)
	}
	switch m.Run {
	case "":
		m.Run = "sync"
	case "sync", "job":
	default:
		return errors.New("run: sync or job")
	}
	if m.Health != nil {
		for k := range m.Health.Inputs {
			if _, ok := m.Input(k); !ok {
				return fmt.Errorf("health.inputs: %q is not an input", k)
			}
		}
	}
	return nil
}

// fillDefaults: the cost hint, the health check's rows and the limits.
func fillDefaults(m *Manifest) {
	if m.CostHint == nil {
		m.CostHint = &CostHint{MinUnits: 1, MaxUnits: m.PageBudget}
	}
	if m.CostHint.Text == "" {
		m.CostHint.Text = fmt.Sprintf("%d to %d units: one a page fetched plainly, more for pages that need the browser (docs/recipes.md)", m.CostHint.MinUnits, m.CostHint.MaxUnits)
	}
	if m.Health != nil && m.Health.MinRows == 0 {
		m.Health.MinRows = 1
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
}

// readBody takes the body its kind names (a json body, ScriptFile or
// ModuleFile) and hashes the manifest with it.
func (r *Recipe) readBody(manifest []byte, files map[string][]byte) error {
	m := &r.Manifest
	h := sha256.New()
	h.Write(manifest)
	switch m.Kind {
	case KindJSON:
		if m.JSON == nil {
			return errors.New("a json recipe has a json body")
		}
		if err := r.compileJSON(); err != nil {
			return err
		}
	case KindScript:
		src, ok := files[ScriptFile]
		if !ok || len(bytes.TrimSpace(src)) == 0 {
			return errors.New("a script recipe has " + ScriptFile)
		}
		r.Script = string(src)
		h.Write(src)
	case KindModule:
		mod, ok := files[ModuleFile]
		if !ok || len(mod) == 0 {
			return errors.New("a module recipe has " + ModuleFile)
		}
		r.Module = mod
		h.Write(mod)
	default:
		return fmt.Errorf("kind %q: want json, module or script", m.Kind)
	}
	if m.Kind != KindJSON && m.JSON != nil {
		return errors.New("only a json recipe has a json body")
	}
	r.Hash = hex.EncodeToString(h.Sum(nil)[:12])
	return nil
}

// compileJSON checks a json body and compiles its schemas.
func (r *Recipe) compileJSON() error {
	b := r.JSON
	if len(b.URLs) == 0 {
		return errors.New("json.urls: at least one start page")
	}
	for _, u := range b.URLs {
		for _, name := range Placeholders(u) {
			if _, ok := r.Input(name); !ok {
				return fmt.Errorf("json.urls: %q names no input {%s}", u, name)
			}
		}
	}
	if len(b.Rows) == 0 {
		return errors.New("json.rows: a json_css schema is required")
	}
	var err error
	if r.Rows, err = cssschema.Compile(b.Rows, "json.rows.", "rows"); err != nil {
		return err
	}
	if b.Detail != nil {
		if b.Detail.Link == "" {
			return errors.New("json.detail.link: the field holding the detail page's URL")
		}
		if r.Detail, err = cssschema.CompileFields(b.Detail.Fields, "json.detail.fields"); err != nil {
			return err
		}
	}
	if b.Next != "" {
		if _, err := cssschema.Selector(b.Next); err != nil {
			return fmt.Errorf("json.next: %w", err)
		}
	}
	if b.MaxPages < 0 {
		return errors.New("json.max_pages: not negative")
	}
	return nil
}

// Placeholders are the input names a URL template's {name}s refer to.
func Placeholders(s string) []string {
	var out []string
	for _, m := range placeholderRE.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// Expand fills a URL template's {name}s with value(name): a template that
// is just "{name}" takes the value as it is (trimmed); elsewhere values
// are query-escaped, and a name value does not know is left empty.
func Expand(tmpl string, value func(name string) (string, bool)) string {
	if names := Placeholders(tmpl); len(names) == 1 && tmpl == "{"+names[0]+"}" {
		v, _ := value(names[0])
		return strings.TrimSpace(v)
	}
	return placeholderRE.ReplaceAllStringFunc(tmpl, func(m string) string {
		v, ok := value(m[1 : len(m)-1])
		if !ok {
			return ""
		}
		return url.QueryEscape(v)
	})
}
