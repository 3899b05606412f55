package content

import (
	"net/url"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// baseURL is the URL that relative references in doc resolve against: the
// first <base href> (itself resolved against pageURL), else pageURL.
func baseURL(doc *html.Node, pageURL *url.URL) *url.URL {
	b := findFirst(doc, func(n *html.Node) bool {
		return n.DataAtom == atom.Base && n.Namespace == "" && hasAttr(n, "href")
	})
	if b == nil {
		return pageURL
	}
	ref, err := url.Parse(cleanRef(attr(b, "href")))
	if err != nil {
		return pageURL
	}
	u := pageURL.ResolveReference(ref)
	if s := strings.ToLower(u.Scheme); s != "" && s != "http" && s != "https" {
		// <base href="javascript:..."> and friends are ignored by browsers
		// for navigation; so do we.
		return pageURL
	}
	return u
}

// cleanRef strips what browsers strip from an attribute URL: surrounding
// white space, and tabs and newlines anywhere.
func cleanRef(s string) string {
	s = strings.TrimSpace(s)
	if strings.ContainsAny(s, "\t\n\r") {
		s = strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(s)
	}
	return s
}

// resolve returns ref made absolute against base, or "" if ref is not a
// URL.
func resolve(base *url.URL, ref string) string {
	ref = cleanRef(ref)
	if ref == "" {
		return ""
	}
	u, err := url.Parse(ref)
	if err != nil {
		return ""
	}
	return base.ResolveReference(u).String()
}

// scheme returns the lower-cased scheme of a raw reference, or "".
func scheme(ref string) string {
	ref = cleanRef(ref)
	i := strings.IndexByte(ref, ':')
	if i <= 0 {
		return ""
	}
	for j, r := range ref[:i] {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || j > 0 && (r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.')) {
			return ""
		}
	}
	return strings.ToLower(ref[:i])
}

// resolveSrcset makes every candidate URL of a srcset attribute absolute.
func resolveSrcset(base *url.URL, srcset string) string {
	parts := strings.Split(srcset, ",")
	out := parts[:0]
	for _, p := range parts {
		f := strings.Fields(p)
		if len(f) == 0 {
			continue
		}
		if abs := resolve(base, f[0]); abs != "" {
			f[0] = abs
		}
		out = append(out, strings.Join(f, " "))
	}
	return strings.Join(out, ", ")
}

// firstSrcset returns the first candidate URL of a srcset attribute.
func firstSrcset(srcset string) string {
	for _, p := range strings.Split(srcset, ",") {
		if f := strings.Fields(p); len(f) > 0 {
			return f[0]
		}
	}
	return ""
}
