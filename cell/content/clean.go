package content

import (
	"net/url"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/trawlhq/trawl/internal/htmlread"
)

// cleanContent prepares the main-content tree for output, in place: it drops
// scripts, forms and other non-content elements, makes URLs absolute
// against base, drops presentational attributes and normalises code blocks
// to <pre><code class="language-x">text</code></pre>.
func cleanContent(root *html.Node, base *url.URL) {
	var pres, dead []*html.Node // dead: elements replaced by their content
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		for c := n.FirstChild; c != nil; {
			next := c.NextSibling
			switch c.Type {
			case html.CommentNode, html.DoctypeNode:
				n.RemoveChild(c)
			case html.ElementNode:
				if dropElement(c) {
					n.RemoveChild(c)
					break
				}
				if c.DataAtom == atom.A && deadLink(c) {
					dead = append(dead, c)
				}
				if c.DataAtom == atom.Q {
					// Browsers add the quotation marks of <q>; so do we.
					c.InsertBefore(&html.Node{Type: html.TextNode, Data: "“"}, c.FirstChild)
					c.AppendChild(&html.Node{Type: html.TextNode, Data: "”"})
					dead = append(dead, c)
				}
				cleanAttrs(c, base)
				if c.DataAtom == atom.Pre {
					pres = append(pres, c)
				} else {
					walk(c)
				}
			}
			c = next
		}
	}
	walk(root)
	for _, a := range dead {
		unwrap(a)
	}
	for _, p := range pres {
		normaliseCodeBlock(p)
	}
}

// dropElement reports elements that never belong in extracted content.
func dropElement(n *html.Node) bool {
	if n.Namespace != "" { // inline <svg> and <math>
		return n.Data == "svg"
	}
	switch n.DataAtom {
	case atom.Script, atom.Style, atom.Noscript, atom.Template, atom.Link, atom.Meta,
		atom.Form, atom.Button, atom.Input, atom.Select, atom.Textarea, atom.Iframe,
		atom.Object, atom.Embed, atom.Svg, atom.Dialog:
		return true
	case atom.A:
		if n.FirstChild == nil {
			// DocBook index anchors, empty placeholders.
			return true
		}
		// Sphinx "¶" permalinks and similar heading anchors.
		if strings.HasPrefix(attr(n, "href"), "#") {
			switch htmlread.InnerText(n) {
			case "¶", "#", "§", "🔗", "":
				return n.FirstChild.NextSibling == nil && n.FirstChild.Type == html.TextNode
			}
		}
	}
	if hasAttr(n, "hidden") || attr(n, "aria-hidden") == "true" && n.DataAtom != atom.Span {
		return true
	}
	return styleHidden(attr(n, "style"))
}

// styleHidden reports an inline style that hides the element (display:none
// or visibility:hidden): schema.org copies of the article, templates for
// scripts. What a script might reveal later is not on the page.
func styleHidden(style string) bool {
	if style == "" {
		return false
	}
	s := strings.ToLower(strings.Join(strings.Fields(style), ""))
	return strings.Contains(s, "display:none") || strings.Contains(s, "visibility:hidden")
}

// deadLink reports links that cannot navigate: without href, or to
// javascript: or vbscript: once scripts are gone. They are replaced by their
// content.
func deadLink(a *html.Node) bool {
	href := attr(a, "href")
	if strings.TrimSpace(href) == "" {
		return true
	}
	switch scheme(href) {
	case "javascript", "vbscript":
		return true
	}
	return false
}

// keptAttrs are the attributes that survive cleaning.
var keptAttrs = map[string]bool{
	"href": true, "src": true, "srcset": true, "alt": true, "title": true,
	"id": true, "colspan": true, "rowspan": true, "headers": true, "scope": true,
	"poster": true, "controls": true, "lang": true, "dir": true, "datetime": true,
	"cite": true, "start": true, "type": true, "reversed": true, "value": true,
	"width": true, "height": true, "abbr": true, "span": true,
	"role": true, // role="presentation" marks layout tables
}

func cleanAttrs(n *html.Node, base *url.URL) {
	// Lazy-loaded images carry their real source in data-src.
	if n.DataAtom == atom.Img {
		if src := attr(n, "src"); src == "" || strings.HasPrefix(src, "data:") {
			if ds := attr(n, "data-src"); ds != "" {
				setAttr(n, "src", ds)
			} else if ds := attr(n, "data-srcset"); ds != "" && attr(n, "srcset") == "" {
				setAttr(n, "srcset", ds)
			}
		}
		// An <img> with only a srcset: Markdown needs one src.
		if attr(n, "src") == "" {
			if first := firstSrcset(attr(n, "srcset")); first != "" {
				setAttr(n, "src", first)
			}
		}
	}
	out := n.Attr[:0]
	for _, a := range n.Attr {
		if a.Namespace != "" || !keptAttrs[a.Key] {
			// The class carries the code language until the <pre> is
			// normalised; keep it on code blocks only.
			if a.Key == "class" && (n.DataAtom == atom.Pre || n.DataAtom == atom.Code) {
				out = append(out, a)
			}
			continue
		}
		switch a.Key {
		case "href", "src", "poster", "cite":
			if v := resolve(base, a.Val); v != "" {
				a.Val = v
			}
		case "srcset":
			a.Val = resolveSrcset(base, a.Val)
		}
		out = append(out, a)
	}
	n.Attr = out
}

// normaliseCodeBlock rewrites pre as <pre><code class="language-x">text</code></pre>
// with the language detected from the markup around it, so that both the
// HTML and the Markdown (fenced block with info string) carry it.
func normaliseCodeBlock(pre *html.Node) {
	lang := codeLanguage(pre)
	var b strings.Builder
	preText(&b, pre)
	text := b.String()
	if lang == "" {
		lang = sniffLanguage(pre, text)
	}
	for pre.FirstChild != nil {
		pre.RemoveChild(pre.FirstChild)
	}
	pre.Attr = nil
	code := &html.Node{Type: html.ElementNode, Data: "code", DataAtom: atom.Code}
	if lang != "" {
		code.Attr = []html.Attribute{{Key: "class", Val: "language-" + lang}}
	}
	code.AppendChild(&html.Node{Type: html.TextNode, Data: text})
	pre.AppendChild(code)
	// Sphinx wraps code blocks in <div class="highlight-x"><div class="highlight">;
	// the class is no longer needed once the language is on <code>.
	for p := pre.Parent; p != nil && p.DataAtom == atom.Div && len(p.Attr) > 0; p = p.Parent {
		p.Attr = nil
	}
}

// annotateCode puts the detected language of every code block of doc on
// the <pre> itself, as class="language-x".
func annotateCode(doc *html.Node) {
	for _, pre := range findAll(nil, doc, func(n *html.Node) bool { return n.DataAtom == atom.Pre && n.Namespace == "" }) {
		lang := codeLanguage(pre)
		if lang == "" {
			var b strings.Builder
			preText(&b, pre)
			lang = sniffLanguage(pre, b.String())
		}
		if lang != "" {
			setAttr(pre, "class", strings.TrimSpace("language-"+lang+" "+attr(pre, "class")))
		}
	}
}

func preText(b *strings.Builder, n *html.Node) {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		switch {
		case c.Type == html.TextNode:
			b.WriteString(c.Data)
		case isElem(c, atom.Br):
			b.WriteByte('\n')
		case c.Type == html.ElementNode && !htmlread.NotText(c):
			preText(b, c)
		}
	}
}

// codeLanguage finds a language name in the classes of pre, its <code>
// child, or up to three wrapping elements: language-x, lang-x (Prism,
// highlight.js, Markdown renderers, Apache's prettify), highlight-x and
// highlight-source-x (Sphinx, GitHub), "sourceCode x" (Pandoc),
// "brush: x" (SyntaxHighlighter).
func codeLanguage(pre *html.Node) string {
	nodes := []*html.Node{pre}
	if c := firstElemChild(pre); c != nil && c.DataAtom == atom.Code {
		nodes = append(nodes, c)
	}
	p := pre.Parent
	for i := 0; i < 3 && p != nil && p.Type == html.ElementNode; i++ {
		nodes = append(nodes, p)
		p = p.Parent
	}
	for _, n := range nodes {
		if l, ok := langFromClass(attr(n, "class")); ok {
			return l
		}
		if l := attr(n, "data-lang"); l != "" {
			return normaliseLang(l)
		}
	}
	return ""
}

func firstElemChild(n *html.Node) *html.Node {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode {
			return c
		}
	}
	return nil
}

// langFromClass returns the language named in a class attribute. ok is
// true when the class names a language slot, even if it says "none".
func langFromClass(class string) (lang string, ok bool) {
	f := strings.Fields(class)
	for i, c := range f {
		lc := strings.ToLower(c)
		for _, prefix := range []string{"language-", "lang-", "highlight-source-", "highlight-"} {
			if strings.HasPrefix(lc, prefix) {
				return normaliseLang(lc[len(prefix):]), true
			}
		}
		if (lc == "sourcecode" || lc == "brush:") && i+1 < len(f) {
			return normaliseLang(f[i+1]), true
		}
	}
	return "", false
}

var langAliases = map[string]string{
	"python3": "python", "py3": "python", "py": "python", "ipython3": "python",
	"shell-session": "console", "shellsession": "console",
	"none": "", "text": "", "plain": "", "plaintext": "", "default": "", "nohighlight": "", "txt": "",
	"js": "javascript", "c++": "cpp",
}

func normaliseLang(l string) string {
	l = strings.Trim(strings.ToLower(l), ";:,")
	if a, ok := langAliases[l]; ok {
		return a
	}
	for _, r := range l {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune("+#._-", r)) {
			return ""
		}
	}
	return l
}

var sqlKeywords = map[string]bool{
	"SELECT": true, "INSERT": true, "UPDATE": true, "DELETE": true, "CREATE": true,
	"ALTER": true, "DROP": true, "WITH": true, "GRANT": true, "REVOKE": true,
	"BEGIN": true, "COMMIT": true, "ROLLBACK": true, "EXPLAIN": true, "SET": true,
	"SHOW": true, "VALUES": true, "COPY": true, "TRUNCATE": true, "CALL": true,
	"ANALYZE": true, "VACUUM": true, "DECLARE": true, "FETCH": true, "PREPARE": true,
	"EXECUTE": true, "LISTEN": true, "NOTIFY": true, "COMMENT": true, "REINDEX": true,
	"LOCK": true, "CLUSTER": true, "MERGE": true, "TABLE": true, "START": true,
	"SAVEPOINT": true, "RELEASE": true, "IMPORT": true, "REFRESH": true, "SECURITY": true,
}

// sniffLanguage guesses the language of DocBook listings, which carry no
// language in their markup: SQL (by its leading keyword), C, or a shell
// session. Other blocks get none.
func sniffLanguage(pre *html.Node, text string) string {
	if !hasClass(pre, "programlisting") && !hasClass(pre, "synopsis") && !hasClass(pre, "screen") {
		return ""
	}
	line := ""
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "--") && !strings.HasPrefix(l, "/*") {
			line = l
			break
		}
	}
	switch {
	case line == "":
		return ""
	case strings.HasPrefix(line, "$ ") || strings.HasPrefix(line, "# "):
		return "console"
	case strings.HasPrefix(line, "#include") || strings.HasPrefix(line, "#define"):
		return "c"
	}
	word := line
	if i := strings.IndexAny(line, " \t(;"); i >= 0 {
		word = line[:i]
	}
	if sqlKeywords[strings.ToUpper(word)] {
		return "sql"
	}
	for _, p := range []string{"int ", "void ", "static ", "typedef ", "struct ", "char ", "extern ", "const char"} {
		if strings.HasPrefix(line, p) {
			return "c"
		}
	}
	return ""
}
