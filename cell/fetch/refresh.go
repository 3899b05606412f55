package fetch

import (
	"bytes"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/html"
)

// maxRefreshDelay is the longest <meta http-equiv="refresh"> delay, in
// seconds, that the HTTP engine treats as a redirect. Longer ones are
// "this page has moved, you will be taken there" notices or periodic
// reloads; the page itself is then the answer.
const maxRefreshDelay = 5

// refreshScanLen bounds how far into a page refreshTarget looks: a refresh
// belongs in the <head>, and redirect stubs are small.
const refreshScanLen = 64 << 10

// refreshTarget returns the absolute URL that page, fetched from pageURL,
// sends the reader to with a <meta http-equiv="refresh"> of at most
// maxRefreshDelay seconds, or "" if there is none, it names no URL, it is
// not http(s), or it is the page itself (a reload). The content attribute
// is parsed as the WHATWG "shared declarative refresh steps" do:
// "5; url=/next", "0;URL='/next'", "0, /next".
func refreshTarget(page []byte, pageURL string) string {
	z := html.NewTokenizer(bytes.NewReader(page[:min(len(page), refreshScanLen)]))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return ""
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			if string(name) == "body" {
				return ""
			}
			if string(name) != "meta" {
				continue
			}
			var equiv, content string
			for hasAttr {
				var k, v []byte
				k, v, hasAttr = z.TagAttr()
				switch string(k) {
				case "http-equiv":
					equiv = string(v)
				case "content":
					content = string(v)
				}
			}
			if !strings.EqualFold(strings.TrimSpace(equiv), "refresh") {
				continue
			}
			delay, target, ok := parseRefresh(content)
			if !ok || delay > maxRefreshDelay || target == "" {
				return ""
			}
			return resolveRefresh(pageURL, target)
		}
	}
}

// parseRefresh parses a refresh content value: a delay in seconds, then
// optionally a URL.
func parseRefresh(s string) (delay int, target string, ok bool) {
	s = strings.TrimLeft(s, " \t\n\f\r")
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		if s == "" || s[0] != '.' {
			return 0, "", false
		}
	}
	delay, _ = strconv.Atoi(s[:i])
	if i == 0 {
		delay = 0
	}
	s = s[i:]
	// A fractional part is allowed and ignored.
	s = strings.TrimLeft(s, "0123456789.")
	s = strings.TrimLeft(s, " \t\n\f\r")
	if s == "" {
		return delay, "", true
	}
	if s[0] != ';' && s[0] != ',' {
		return 0, "", false
	}
	s = strings.TrimLeft(s[1:], " \t\n\f\r")
	if len(s) >= 3 && strings.EqualFold(s[:3], "url") {
		rest := strings.TrimLeft(s[3:], " \t\n\f\r")
		if strings.HasPrefix(rest, "=") {
			s = strings.TrimLeft(rest[1:], " \t\n\f\r")
		}
	}
	if s != "" && (s[0] == '"' || s[0] == '\'') {
		q := s[0]
		s = s[1:]
		if j := strings.IndexByte(s, q); j >= 0 {
			s = s[:j]
		}
	}
	return delay, strings.TrimSpace(s), true
}

// resolveRefresh makes target absolute against pageURL and returns it,
// or "" when it is not http(s) or is the same page (a reload).
func resolveRefresh(pageURL, target string) string {
	base, err := url.Parse(pageURL)
	if err != nil {
		return ""
	}
	t, err := base.Parse(target)
	if err != nil || (t.Scheme != "http" && t.Scheme != "https") {
		return ""
	}
	t.Fragment = ""
	b := *base
	b.Fragment = ""
	if t.String() == b.String() {
		return ""
	}
	return t.String()
}
