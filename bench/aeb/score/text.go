package score

import (
	"html"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

var md = goldmark.New(goldmark.WithExtensions(extension.GFM))

// MarkdownText is the text a reader sees in GFM: link targets, image
// references and markup go; link texts, code and table cells stay; blocks
// are separated by newlines. The benchmark scores text, so Markdown syntax
// must not count as words (a link's URL would).
func MarkdownText(src string) string {
	source := []byte(src)
	doc := md.Parser().Parse(text.NewReader(source))
	var b strings.Builder
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if n.Type() == ast.TypeBlock && !entering {
			b.WriteByte('\n')
		}
		if !entering {
			return ast.WalkContinue, nil
		}
		switch v := n.(type) {
		case *ast.Image:
			return ast.WalkSkipChildren, nil
		case *ast.Text:
			// Backslash escapes and entity references are syntax too.
			b.WriteString(html.UnescapeString(string(util.UnescapePunctuations(v.Segment.Value(source)))))
			if v.SoftLineBreak() || v.HardLineBreak() {
				b.WriteByte('\n')
			}
		case *ast.String:
			b.Write(v.Value)
		case *ast.AutoLink:
			b.Write(v.Label(source))
		case *ast.FencedCodeBlock, *ast.CodeBlock:
			lines := n.Lines()
			for i := 0; i < lines.Len(); i++ {
				seg := lines.At(i)
				b.Write(seg.Value(source))
			}
		}
		if n.Type() == ast.TypeBlock && n.HasChildren() {
			// Table cells are blocks too; keep them apart.
			b.WriteByte(' ')
		}
		return ast.WalkContinue, nil
	})
	return b.String()
}
