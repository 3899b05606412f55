// Package detect reads a fetched page and says whether it is content to
// keep, a JavaScript shell (an application whose content only a browser
// would see), or a bot wall (a challenge, captcha or block page put up for
// clients the site takes for robots).
//
// It is a pure function of the status, media type and body: the engine
// ladder (cell/fetch/ladder) uses it to decide when to climb from plain
// HTTP to the browser and from the browser to a proxy.
package detect

import (
	"bytes"
	"mime"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// Verdict is what a page is.
type Verdict uint8

const (
	// Content is a page to keep, whatever its status: a site's 404 or 500
	// page is still the site's answer.
	Content Verdict = iota
	// Shell is an HTML page whose content is built by scripts: little text,
	// an empty application root, or a <noscript> asking for JavaScript.
	Shell
	// Blocked is a bot wall: a challenge page, a captcha, or an "access
	// denied" page, sent instead of the content.
	Blocked
)

func (v Verdict) String() string {
	switch v {
	case Content:
		return "content"
	case Shell:
		return "shell"
	case Blocked:
		return "blocked"
	}
	return "unknown"
}

// Result is the verdict on one page and why.
type Result struct {
	Verdict Verdict
	// Reason names the signal that decided, for logs and tests ("cloudflare
	// challenge", "empty app root #root"); empty for Content.
	Reason string
	// Words is the amount of visible text outside scripts, styles and
	// <noscript>: whitespace-separated words, each CJK character counted as
	// one. Counting stops at 300, past which no page is a wall or a shell.
	Words int
}

// Thresholds, in words of visible text.
const (
	// A page under smallPage words is small enough that a block signature
	// on it means a bot wall rather than, say, an article about bot walls.
	smallPage = 300
	// A page under shellPage words with an empty app root or a noscript
	// warning is a shell; over it the server rendered the content anyway.
	shellPage = 100
	// A page with scripts and under barePage words has nothing to read
	// without them.
	barePage = 20
)

// maxScan bounds the bytes read: bot walls and shells are small, and a page
// that is still going after this much has content.
const maxScan = 1 << 20

// Page classifies a fetched page. status is the HTTP status, contentType the
// media type (parameters allowed; empty means sniff the body), body the page
// decoded to UTF-8. Only HTML is ever a shell or a bot wall.
func Page(status int, contentType string, body []byte) Result {
	if !isHTML(contentType, body) {
		return Result{Verdict: Content}
	}
	if len(body) > maxScan {
		body = body[:maxScan]
	}
	s := scan(body)
	small := s.words < smallPage
	blockStatus := status == http.StatusForbidden || status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable
	res := Result{Words: s.words}
	block := func(reason string) Result {
		res.Verdict, res.Reason = Blocked, reason
		return res
	}

	if small || blockStatus {
		lower := bytes.ToLower(body)
		if reason := platform(lower); reason != "" {
			return block(reason)
		}
		if small {
			title := strings.ToLower(strings.Join(strings.Fields(s.title), " "))
			titled := matchAny(title, blockTitles)
			phrased := matchAny(s.text.String(), blockPhrases)
			if w := captcha(lower); w != "" && (blockStatus || titled != "" || phrased != "") {
				return block("captcha (" + w + ")")
			}
			if titled != "" && (blockStatus || strongTitle(titled)) {
				return block("block page titled " + quote(titled))
			}
			if blockStatus && phrased != "" {
				return block("block page saying " + quote(phrased))
			}
		}
	}

	if status < 200 || status > 299 {
		return res
	}
	shell := func(reason string) Result {
		res.Verdict, res.Reason = Shell, reason
		return res
	}
	switch {
	case s.emptyRoot != "" && s.words < shellPage:
		return shell("empty app root " + s.emptyRoot)
	case s.noscriptJS && s.words < shellPage:
		return shell("noscript asks for JavaScript")
	case s.scripts > 0 && s.words < barePage:
		return shell("no text without scripts")
	}
	return res
}

func isHTML(contentType string, body []byte) bool {
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt == "" {
		mt, _, _ = mime.ParseMediaType(http.DetectContentType(body))
	}
	return mt == "text/html" || mt == "application/xhtml+xml"
}

// Signatures of the bot-wall products: markers their challenge and block
// pages carry in markup or script, not in prose. Lower case.
var platforms = []struct{ reason, marker string }{
	{"cloudflare challenge", "/cdn-cgi/challenge-platform/"},
	{"cloudflare challenge", "cf_chl_opt"},
	{"cloudflare challenge", "cf-browser-verification"},
	{"cloudflare block", "cf-error-details"},
	{"cloudflare block", "why have i been blocked?"},
	{"imperva incapsula", "_incapsula_resource"},
	{"imperva incapsula", "incapsula incident id"},
	{"datadome", "captcha-delivery.com"},
	{"perimeterx", "px-captcha"},
	{"perimeterx", "_pxappid"},
	{"aws waf", "awswaf"},
	{"sucuri firewall", "sucuri website firewall"},
	{"ddos-guard", "ddos-guard"},
	{"akamai", "you don't have permission to access"},
	{"google unusual traffic", "our systems have detected unusual traffic"},
	{"browser check", "checking your browser before accessing"},
}

func platform(lower []byte) string {
	for _, p := range platforms {
		if bytes.Contains(lower, []byte(p.marker)) {
			return p.reason
		}
	}
	return ""
}

// Captcha widgets: by themselves they may guard a login or contact form,
// so they count only on a small page that also looks like a wall.
var captchas = []struct{ name, marker string }{
	{"g-recaptcha", "g-recaptcha"},
	{"g-recaptcha", "google.com/recaptcha/api"},
	{"h-captcha", "h-captcha"},
	{"h-captcha", "hcaptcha.com/1/api.js"},
	{"cf-turnstile", "cf-turnstile"},
	{"cf-turnstile", "challenges.cloudflare.com/turnstile"},
}

func captcha(lower []byte) string {
	for _, c := range captchas {
		if bytes.Contains(lower, []byte(c.marker)) {
			return c.name
		}
	}
	return ""
}

// Titles and phrases of bot walls, lower case.
var blockTitles = []string{
	"just a moment", "attention required", "access denied", "access to this page has been denied",
	"request blocked", "request rejected", "are you a robot", "are you human", "human verification",
	"bot verification", "verify you are human", "security check", "pardon our interruption",
	"one more step", "you have been blocked",
}

// strongTitles are wall titles a real page almost never has, so they decide
// even with a 200 status.
var strongTitles = []string{
	"just a moment", "attention required", "access denied", "access to this page has been denied",
	"are you a robot", "verify you are human", "human verification", "bot verification",
	"pardon our interruption", "you have been blocked",
}

var blockPhrases = []string{
	"verify you are human", "verifying you are human", "are you a robot", "not a robot",
	"unusual traffic", "automated access", "automated requests", "enable javascript and cookies to continue",
	"complete the security check", "press & hold", "press and hold", "you have been blocked",
	"access denied", "request could not be satisfied", "request blocked",
}

func strongTitle(t string) bool {
	for _, s := range strongTitles {
		if t == s {
			return true
		}
	}
	return false
}

// matchAny returns the first of needles found in s.
func matchAny(s string, needles []string) string {
	for _, n := range needles {
		if strings.Contains(s, n) {
			return n
		}
	}
	return ""
}

func quote(s string) string { return `"` + s + `"` }

// App roots that frameworks render into: React (create-react-app, Vite),
// Vue, Next.js, Nuxt, Gatsby, SvelteKit; Angular's is an element.
var appRootIDs = map[string]bool{
	"root": true, "app": true, "__next": true, "__nuxt": true, "___gatsby": true,
	"svelte": true, "react-root": true, "app-root": true, "main-app": true,
}

// scanned is what one pass over the tokens found.
type scanned struct {
	words      int
	title      string
	text       strings.Builder // visible text, lower case (for phrases); short, since scanning stops at smallPage words
	scripts    int
	emptyRoot  string // "#root", "<app-root>"
	noscriptJS bool
}

// Elements whose text a reader does not see.
var hidden = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Noscript: true, atom.Template: true,
	atom.Svg: true, atom.Math: true,
}

func scan(body []byte) *scanned {
	s := &scanned{}
	z := html.NewTokenizer(bytes.NewReader(body))
	var (
		skip     []atom.Atom // open hidden elements
		inTitle  bool
		noscript strings.Builder
		root     string // an app root just opened, waiting to see if it is empty
		rootTag  atom.Atom
		rootName string
	)
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		if root != "" && !(tt == html.TextToken && len(bytes.TrimSpace(z.Text())) == 0) {
			// The first thing after the root's start tag: empty if it is the
			// matching end tag.
			if tt == html.EndTagToken {
				name, _ := z.TagName()
				a := atom.Lookup(name)
				if (rootTag != 0 && a == rootTag) || (rootTag == 0 && string(name) == rootName) {
					if s.emptyRoot == "" {
						s.emptyRoot = root
					}
				}
			}
			root = ""
		}
		switch tt {
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			a := atom.Lookup(name)
			if a == atom.Script {
				s.scripts++
			}
			if a == atom.Title && len(skip) == 0 {
				inTitle = tt == html.StartTagToken
			}
			if hidden[a] && tt == html.StartTagToken {
				skip = append(skip, a)
				continue
			}
			if len(skip) > 0 {
				continue
			}
			if a == 0 && string(name) == "app-root" && tt == html.StartTagToken {
				root, rootTag, rootName = "<app-root>", 0, "app-root"
				continue
			}
			for hasAttr {
				var k, v []byte
				k, v, hasAttr = z.TagAttr()
				if string(k) == "id" && appRootIDs[string(v)] {
					if tt == html.SelfClosingTagToken {
						if s.emptyRoot == "" {
							s.emptyRoot = "#" + string(v)
						}
					} else {
						root, rootTag, rootName = "#"+string(v), a, string(name)
					}
				}
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			a := atom.Lookup(name)
			if a == atom.Title {
				inTitle = false
			}
			if n := len(skip); n > 0 && skip[n-1] == a {
				skip = skip[:n-1]
				if a == atom.Noscript && len(skip) == 0 && asksForJS(noscript.String()) {
					s.noscriptJS = true
				}
			}
		case html.TextToken:
			text := z.Text()
			if inTitle {
				s.title += string(text)
				continue
			}
			if len(skip) > 0 {
				if skip[len(skip)-1] == atom.Noscript && noscript.Len() < 4096 {
					noscript.Write(text)
				}
				continue
			}
			s.words += countWords(text)
			if s.words >= smallPage {
				// Nothing further can make this page a wall or a shell.
				s.words = smallPage
				return s
			}
			s.text.WriteString(strings.ToLower(string(text)))
			s.text.WriteByte(' ')
		}
	}
	if len(skip) > 0 && skip[len(skip)-1] == atom.Noscript && asksForJS(noscript.String()) {
		s.noscriptJS = true // an unclosed <noscript>
	}
	return s
}

// asksForJS reports whether noscript text asks the reader to turn
// JavaScript on. The text of a <noscript> is raw: it may hold markup.
func asksForJS(text string) bool {
	t := strings.ToLower(text)
	if !strings.Contains(t, "javascript") && !strings.Contains(t, "java script") {
		return false
	}
	for _, w := range []string{"enable", "turn on", "requires", "require", "need", "must", "activate", "allow", "switch on", "without"} {
		if strings.Contains(t, w) {
			return true
		}
	}
	return false
}

// countWords counts whitespace-separated words, plus one for each CJK
// character, since those scripts do not separate words with spaces.
func countWords(b []byte) int {
	n := 0
	in := false
	for len(b) > 0 {
		if c := b[0]; c < utf8.RuneSelf {
			b = b[1:]
			if c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v' {
				in = false
			} else if !in {
				n++
				in = true
			}
			continue
		}
		r, size := utf8.DecodeRune(b)
		b = b[size:]
		switch {
		case unicode.IsSpace(r):
			in = false
		case unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul):
			n++
			in = false
		default:
			if !in {
				n++
				in = true
			}
		}
	}
	return n
}
