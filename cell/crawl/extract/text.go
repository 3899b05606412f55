package extract

import (
	"net/url"
	"strings"

	"golang.org/x/net/html"

	"github.com/trawlhq/trawl/cell/content"
	"github.com/trawlhq/trawl/internal/htmlread"
)

// pageMarkdown is the Markdown the text strategies read: the page's own, or
// else the main content of its HTML (cell/content), or else the HTML's
// visible text (internal/htmlread), a paragraph a block.
func pageMarkdown(p Page) string {
	if strings.TrimSpace(p.Markdown) != "" {
		return p.Markdown
	}
	if strings.TrimSpace(p.HTML) == "" {
		return ""
	}
	u, _ := url.Parse(p.URL) // nil on error: links stay relative
	if d, err := content.Process([]byte(p.HTML), u, content.Options{}); err == nil && strings.TrimSpace(d.Markdown) != "" {
		return d.Markdown
	}
	doc, err := html.Parse(strings.NewReader(p.HTML))
	if err != nil {
		return ""
	}
	return strings.ReplaceAll(htmlread.VisibleText(doc), "\n", "\n\n")
}

// paragraphs splits Markdown at blank lines, as Crawl4AI's RegexChunking
// does, with two changes: a fenced code block stays one paragraph even when
// it holds blank lines, and a paragraph made only of headings is joined to
// the paragraph after it, so that no block is a bare title.
func paragraphs(md string) []string {
	var (
		out   []string
		cur   []string
		fence string // the open fence marker, "" outside code
	)
	flush := func() {
		if len(cur) == 0 {
			return
		}
		s := strings.TrimSpace(strings.Join(cur, "\n"))
		cur = cur[:0]
		if s == "" {
			return
		}
		if len(out) > 0 && isHeadingOnly(out[len(out)-1]) {
			out[len(out)-1] += "\n\n" + s
			return
		}
		out = append(out, s)
	}
	md = strings.ReplaceAll(md, "\r\n", "\n")
	for line := range strings.SplitSeq(md, "\n") {
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			cur = append(cur, line)
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			cur = append(cur, line)
			continue
		}
		if trimmed == "" {
			flush()
			continue
		}
		cur = append(cur, line)
	}
	flush()
	return out
}

// isHeadingOnly reports whether every line of a paragraph is an ATX heading.
func isHeadingOnly(s string) bool {
	for line := range strings.SplitSeq(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			return false
		}
	}
	return true
}
