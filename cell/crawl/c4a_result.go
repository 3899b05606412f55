package crawl

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
	"unicode"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// c4aResult is a result in Crawl4AI 0.5+'s CrawlResult shape (its
// model_dump): markdown is an object, every field is present. engine,
// browser_id and duration_ms are ours, after theirs.
type c4aResult struct {
	URL               string            `json:"url"`
	HTML              string            `json:"html"`
	FitHTML           *string           `json:"fit_html"`
	Success           bool              `json:"success"`
	CleanedHTML       *string           `json:"cleaned_html"`
	Media             MediaSet          `json:"media"`
	Links             Links             `json:"links"`
	DownloadedFiles   []string          `json:"downloaded_files"`
	JSExecutionResult map[string]any    `json:"js_execution_result"`
	Screenshot        nullString        `json:"screenshot"`
	PDF               nullString        `json:"pdf"`
	MHTML             *string           `json:"mhtml"`
	Markdown          *c4aMarkdown      `json:"markdown"`
	ExtractedContent  *string           `json:"extracted_content"`
	Metadata          map[string]any    `json:"metadata"`
	ErrorMessage      nullString        `json:"error_message"`
	SessionID         nullString        `json:"session_id"`
	ResponseHeaders   map[string]string `json:"response_headers"`
	StatusCode        nullInt           `json:"status_code"`
	SSLCertificate    any               `json:"ssl_certificate"`
	DispatchResult    any               `json:"dispatch_result"`
	RedirectedURL     nullString        `json:"redirected_url"`
	NetworkRequests   any               `json:"network_requests"`
	ConsoleMessages   any               `json:"console_messages"`
	Tables            []any             `json:"tables"`
	Engine            string            `json:"engine,omitempty"`
	BrowserID         string            `json:"browser_id,omitempty"`
	DurationMS        Number            `json:"duration_ms"`
	// ServerMemoryMB is set on streamed lines, as Crawl4AI's.
	ServerMemoryMB *Number `json:"server_memory_mb,omitempty"`
}

// c4aMarkdown is Crawl4AI's MarkdownGenerationResult.
type c4aMarkdown struct {
	RawMarkdown           string  `json:"raw_markdown"`
	MarkdownWithCitations string  `json:"markdown_with_citations"`
	ReferencesMarkdown    string  `json:"references_markdown"`
	FitMarkdown           *string `json:"fit_markdown"`
	FitHTML               *string `json:"fit_html"`
}

// toC4A shapes a result as Crawl4AI's CrawlResult, with the fit_markdown
// the plan's content filter asks for.
func (cp *c4aPlan) toC4A(r *Result) *c4aResult {
	out := &c4aResult{URL: r.URL, HTML: r.HTML, Success: r.Success, Media: r.Media, Links: r.Links,
		Screenshot: r.Screenshot, PDF: r.PDF, ExtractedContent: r.ExtractedContent, Metadata: r.Metadata,
		ErrorMessage: r.ErrorMessage, SessionID: r.SessionID, ResponseHeaders: r.ResponseHeaders,
		StatusCode: r.StatusCode, RedirectedURL: r.RedirectedURL, Tables: []any{}, Engine: r.Engine,
		BrowserID: r.BrowserID, DurationMS: r.DurationMS}
	if r.Metadata == nil {
		out.Metadata = map[string]any{}
	}
	if r.HTML == "" && !r.Success {
		return out
	}
	if cp.captureJS && len(r.scripts) > 0 {
		var vals []any
		if json.Unmarshal(r.scripts[len(r.scripts)-1].Value, &vals) == nil {
			out.JSExecutionResult = map[string]any{"success": true, "results": vals}
		}
	}
	cleaned := r.CleanedHTML
	out.CleanedHTML = &cleaned
	cites, refs := citations(r.Markdown)
	md := &c4aMarkdown{RawMarkdown: r.Markdown, MarkdownWithCitations: cites, ReferencesMarkdown: refs}
	var fit string
	switch cp.fit {
	case "pruning":
		fit = r.FitMarkdown
		md.FitMarkdown = &fit
	case "bm25":
		fit = bm25Filter(r.Markdown, cp.bm25Query, cp.bm25Threshold)
		md.FitMarkdown = &fit
	default:
		md.FitMarkdown = &fit // Crawl4AI: "" without a content filter
	}
	out.Markdown = md
	return out
}

// failedC4A is a URL that was not crawled.
func failedC4A(u, msg string) *c4aResult {
	r := failed(u, fmt.Errorf("%s", msg))
	return (&c4aPlan{}).toC4A(r)
}

var mdLink = regexp.MustCompile(`(!?)\[([^\]]*)\]\(([^)\s]+)(?:\s+"([^"]*)")?\)`)

// citations turns Markdown's inline links into numbered citations and a
// reference list, as Crawl4AI's markdown_with_citations and
// references_markdown: "text⟨1⟩" and "⟨1⟩ url: text". Images stay.
func citations(md string) (string, string) {
	nums := map[string]int{}
	var order []string
	titles := map[string]string{}
	cited := mdLink.ReplaceAllStringFunc(md, func(m string) string {
		g := mdLink.FindStringSubmatch(m)
		if g[1] == "!" {
			return m
		}
		href := g[3]
		n, ok := nums[href]
		if !ok {
			n = len(order) + 1
			nums[href] = n
			order = append(order, href)
			titles[href] = strings.TrimSpace(g[2])
			if g[4] != "" {
				titles[href] = g[4]
			}
		}
		return fmt.Sprintf("%s⟨%d⟩", g[2], n)
	})
	if len(order) == 0 {
		return cited, ""
	}
	var b strings.Builder
	b.WriteString("\n\n## References\n\n")
	for i, href := range order {
		fmt.Fprintf(&b, "⟨%d⟩ %s", i+1, href)
		if t := titles[href]; t != "" {
			b.WriteString(": " + t)
		}
		b.WriteString("\n")
	}
	return cited, b.String()
}

// bm25Filter keeps the Markdown blocks whose BM25 score for query is at
// least threshold (Crawl4AI's BM25ContentFilter: k1 1.2, b 0.75, blocks in
// page order). An empty query keeps nothing.
func bm25Filter(md, query string, threshold float64) string {
	q := words(query)
	if len(q) == 0 {
		return ""
	}
	var blocks []string
	for _, b := range strings.Split(md, "\n\n") {
		if strings.TrimSpace(b) != "" {
			blocks = append(blocks, b)
		}
	}
	docs := make([][]string, len(blocks))
	df := map[string]int{}
	total := 0
	for i, b := range blocks {
		docs[i] = words(b)
		total += len(docs[i])
		seen := map[string]bool{}
		for _, w := range docs[i] {
			if !seen[w] {
				seen[w] = true
				df[w]++
			}
		}
	}
	if len(blocks) == 0 {
		return ""
	}
	avg := float64(total) / float64(len(blocks))
	const k1, b = 1.2, 0.75
	type scored struct {
		i int
		s float64
	}
	var keep []scored
	for i, d := range docs {
		tf := map[string]int{}
		for _, w := range d {
			tf[w]++
		}
		var s float64
		for _, t := range q {
			f := float64(tf[t])
			if f == 0 {
				continue
			}
			n := float64(df[t])
			idf := math.Log((float64(len(docs))-n+0.5)/(n+0.5) + 1)
			s += idf * f * (k1 + 1) / (f + k1*(1-b+b*float64(len(d))/avg))
		}
		if s >= threshold && s > 0 {
			keep = append(keep, scored{i, s})
		}
	}
	sort.Slice(keep, func(a, c int) bool { return keep[a].i < keep[c].i })
	var out []string
	for _, k := range keep {
		out = append(out, blocks[k.i])
	}
	return strings.Join(out, "\n\n")
}

// words lower-cases text into its letter-and-digit words.
func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// schemaHTML is the rendered page prepared for writing a CSS schema, as
// Crawl4AI's preprocess_html_for_schema: scripts, styles, templates and
// comments removed, event-handler and style attributes dropped, classes,
// ids and the other attributes kept (a schema selects on them).
func schemaHTML(page string) string {
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		return ""
	}
	var clean func(n *html.Node)
	clean = func(n *html.Node) {
		for c := n.FirstChild; c != nil; {
			next := c.NextSibling
			drop := c.Type == html.CommentNode
			if c.Type == html.ElementNode {
				switch c.DataAtom {
				case atom.Script, atom.Style, atom.Noscript, atom.Template, atom.Link:
					drop = true
				}
			}
			if drop {
				n.RemoveChild(c)
			} else {
				if c.Type == html.ElementNode {
					kept := c.Attr[:0]
					for _, a := range c.Attr {
						if !strings.HasPrefix(strings.ToLower(a.Key), "on") && a.Key != "style" {
							kept = append(kept, a)
						}
					}
					c.Attr = kept
				}
				clean(c)
			}
			c = next
		}
	}
	clean(doc)
	var b strings.Builder
	if err := html.Render(&b, doc); err != nil {
		return ""
	}
	return b.String()
}
