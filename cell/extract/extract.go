package extract

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"

	"github.com/trawlhq/trawl/internal/httpjson"
)

// MaxContent is the largest `content` a request may carry (bytes); the
// route's body limit is a little larger.
const MaxContent = 2 << 20

// Request is the body of POST /extract (docs/spec/hosted-api.md §2.4a).
type Request struct {
	URL         string          `json:"url,omitempty"`
	Content     *string         `json:"content,omitempty"`
	Instruction string          `json:"instruction,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Example     json.RawMessage `json:"example,omitempty"`
	// Model, Provider and APIKey are accepted and ignored: extraction
	// runs on the one model the operator configured (§2.4a).
	Model    json.RawMessage `json:"model,omitempty"`
	Provider json.RawMessage `json:"provider,omitempty"`
	APIKey   json.RawMessage `json:"api_key,omitempty"`
}

// bad is a request the service refuses (400); nothing is charged.
func bad(format string, a ...any) error {
	return httpjson.Errorf(http.StatusBadRequest, "bad_input", format, a...)
}

// Plan is a checked request: the schema to fill (given, or inferred from
// the example or the instruction) and the input's kind.
type Plan struct {
	Schema      *Schema
	Instruction string
	// Example is the caller's example of the structure, for a model.
	Example json.RawMessage
	// Inferred says where the schema came from: "schema", "example" or
	// "instruction".
	Inferred string
}

// Check refuses a request that cannot run and compiles its schema. With
// an instruction alone, the default extractor reads its fields from it
// (SchemaFromInstruction; none: refused), and a model (CheckFor) shapes
// the data itself from the instruction. A refusal is an
// *httpjson.HTTPError: 400 bad_input, or 413 too_large for content over
// MaxContent. Nothing is charged.
func (r *Request) Check() (*Plan, error) { return r.check(false) }

// CheckFor is Check for an extractor: with a model, an instruction alone
// need not name its fields.
func (r *Request) CheckFor(e *Extractor) (*Plan, error) { return r.check(e != nil && e.Model != nil) }

// anyData is the schema of an instruction a model shapes itself.
const anyData = `{"type":["object","array"]}`

func (r *Request) check(withModel bool) (*Plan, error) {
	hasContent := r.Content != nil && strings.TrimSpace(*r.Content) != ""
	switch {
	case r.URL == "" && !hasContent:
		return nil, bad("one of url or content is required")
	case r.URL != "" && hasContent:
		return nil, bad("give url or content, not both")
	}
	if hasContent && len(*r.Content) > MaxContent {
		return nil, httpjson.Errorf(http.StatusRequestEntityTooLarge, "too_large", "content is %d bytes; at most %d are accepted", len(*r.Content), MaxContent)
	}
	schema := isSet(r.Schema)
	if !schema && strings.TrimSpace(r.Instruction) == "" && !isSet(r.Example) {
		return nil, bad("one of instruction or schema is required (or an example of the structure)")
	}
	if len(r.Instruction) > 8<<10 {
		return nil, bad("instruction is %d bytes; at most %d are accepted", len(r.Instruction), 8<<10)
	}
	p := &Plan{Instruction: strings.TrimSpace(r.Instruction)}
	if isSet(r.Example) {
		p.Example = r.Example
	}
	raw := r.Schema
	p.Inferred = "schema"
	if !schema && isSet(r.Example) {
		var err error
		if raw, err = SchemaFromExample(r.Example); err != nil {
			return nil, bad("example is not JSON: %v", err)
		}
		p.Inferred = "example"
	}
	if !isSet(raw) {
		raw = SchemaFromInstruction(r.Instruction)
		p.Inferred = "instruction"
		if withModel {
			// The model reads the instruction itself and shapes the data.
			raw, p.Inferred = json.RawMessage(anyData), "model"
		}
		if raw == nil {
			return nil, bad("instruction names no field to extract; list the fields (\"the title, the price and whether it is in stock\") or send a schema")
		}
	}
	if raw[0] != '{' {
		return nil, bad("schema must be a JSON object")
	}
	sch, err := CompileSchema(raw)
	if err != nil {
		return nil, bad("%v", err)
	}
	p.Schema = sch
	return p, nil
}

func isSet(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && !bytes.Equal(t, []byte("null"))
}

// Kind is what a text is.
type Kind string

// Kinds of content.
const (
	HTML     Kind = "html"
	Markdown Kind = "markdown"
	Text     Kind = "text"
)

var (
	reTag      = regexp.MustCompile(`(?i)<(?:!doctype|html|head|body|div|p|span|table|tr|td|ul|ol|li|h[1-6]|a\s|img\s|article|section|meta|script|dl|dt|dd|br)\b`)
	reMarkdown = regexp.MustCompile(`(?m)^(?:#{1,6}\s|\s*[-*+]\s|\s*\d+\.\s|\|.*\||>\s|` + "```" + `)|\[[^\]]+\]\([^)]+\)|\*\*[^*]+\*\*`)
)

// Detect says whether content is HTML, Markdown or plain text.
func Detect(content string) Kind {
	head := content
	if len(head) > 64<<10 {
		head = head[:64<<10]
	}
	if n := len(reTag.FindAllStringIndex(head, 3)); n >= 2 || (n == 1 && strings.HasPrefix(strings.TrimSpace(head), "<")) {
		return HTML
	}
	if len(reMarkdown.FindAllStringIndex(head, 2)) >= 1 {
		return Markdown
	}
	return Text
}

// ToHTML renders Markdown (GitHub's tables included) or text (a
// paragraph a line) as HTML, so one reader serves every kind.
func ToHTML(content string, kind Kind) string {
	switch kind {
	case Markdown:
		var buf bytes.Buffer
		md := goldmark.New(goldmark.WithExtensions(extension.Table))
		if err := md.Convert([]byte(content), &buf); err == nil {
			return buf.String()
		}
		fallthrough
	case Text:
		var b strings.Builder
		for line := range strings.SplitSeq(content, "\n") {
			if line = strings.TrimSpace(line); line != "" {
				b.WriteString("<p>" + html.EscapeString(line) + "</p>\n")
			}
		}
		return b.String()
	}
	return content
}

// Page is the input of an extraction.
type Page struct {
	// URL is where the page is (the final URL of a fetch); it makes the
	// page's links absolute. Empty for pasted content.
	URL string
	// HTML is the page as HTML (Markdown and text are turned into HTML
	// by ToHTML first).
	HTML string
	// Markdown is the page's main content as Markdown, for a model; when
	// empty the model gets the text of HTML.
	Markdown string
	// Fetched is when the page was fetched: relative dates on it ("3
	// hours ago") are read against it. Zero: they are not read.
	Fetched time.Time
}

// Deterministic fills plan's schema from the page with no model: the
// embedded default extractor.
func Deterministic(pg Page, plan *Plan) any {
	base, _ := url.Parse(pg.URL)
	if pg.URL == "" {
		base = nil
	}
	p := readHTMLAt(pg.HTML, base, needsLists(plan.Schema.Root), pg.Fetched)
	data := p.fill(plan.Schema.Root)
	return plan.Schema.Validate(data)
}

// needsLists: n has an array of objects (filled from lists of records).
func needsLists(n *Node) bool {
	if n == nil {
		return false
	}
	if n.Main() == "array" && (n.Items == nil || n.Items.Main() == "object" || len(n.Items.Props) > 0) {
		return true
	}
	for _, p := range n.Props {
		if needsLists(p.Node) {
			return true
		}
	}
	return false
}

// ErrModel wraps a failed model call.
var ErrModel = errors.New("model call failed")

// Result is an extraction.
type Result struct {
	Data any
	// Steps are the model calls, one per chunk and repair; none without
	// a model.
	Steps []Step
}

// Step is one model call.
type Step struct {
	Name      string // "chunk 1/3", "repair 2/3"
	InTokens  int
	OutTokens int
}

// Extractor runs extractions: with Model set, through it; otherwise
// deterministically.
type Extractor struct {
	Model *Model // nil: no model configured
}

// Extract runs plan on pg.
func (e *Extractor) Extract(ctx context.Context, pg Page, plan *Plan) (*Result, error) {
	if e == nil || e.Model == nil {
		return &Result{Data: Deterministic(pg, plan)}, nil
	}
	return e.Model.Extract(ctx, pg, plan)
}
