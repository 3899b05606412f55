package fetch

import (
	"bytes"
	"mime"
	"net/http"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/wlynxg/chardet"
	"golang.org/x/net/html"
	"golang.org/x/net/html/charset"
	"golang.org/x/text/encoding"
)

// prescanLen is how far the WHATWG encoding sniffing algorithm looks for a
// <meta> charset declaration.
const prescanLen = 1024

// textKind says how a media type's charset is found.
type textKind int

const (
	binary textKind = iota
	plainText
	htmlText
	xmlText
)

func kindOf(mediaType string) textKind {
	switch {
	case mediaType == "text/html":
		return htmlText
	case mediaType == "text/xml", mediaType == "application/xml", strings.HasSuffix(mediaType, "+xml"):
		return xmlText
	case strings.HasPrefix(mediaType, "text/"),
		mediaType == "application/json", strings.HasSuffix(mediaType, "+json"),
		mediaType == "application/javascript", mediaType == "application/x-javascript",
		mediaType == "application/ecmascript":
		return plainText
	}
	return binary
}

// decodeText finds the media type of body from the Content-Type header
// value contentType (sniffing when it is missing) and, for text types,
// the source charset, and returns body decoded to valid UTF-8 without a
// byte order mark. Other types come back unchanged with an empty charset.
func decodeText(body []byte, contentType string) (out []byte, mediaType, charsetName string) {
	mediaType, params, _ := mime.ParseMediaType(contentType)
	if !strings.Contains(mediaType, "/") { // missing, or junk such as "html"
		mediaType, _, _ = mime.ParseMediaType(http.DetectContentType(body))
	}
	mediaType = strings.ToLower(mediaType)
	kind := kindOf(mediaType)
	if kind == binary {
		return body, mediaType, ""
	}
	enc, name, bomLen := determineCharset(body, params["charset"], kind)
	body = body[bomLen:]
	if name == "utf-8" {
		if !utf8.Valid(body) {
			body = bytes.ToValidUTF8(body, []byte("\uFFFD"))
		}
		return body, mediaType, name
	}
	decoded, err := enc.NewDecoder().Bytes(body)
	if err != nil {
		// The x/text decoders substitute U+FFFD rather than fail; this is
		// a last resort that keeps the UTF-8 promise.
		return bytes.ToValidUTF8(body, []byte("\uFFFD")), mediaType, name
	}
	return decoded, mediaType, name
}

var boms = []struct {
	bom  []byte
	name string
}{
	{[]byte{0xef, 0xbb, 0xbf}, "utf-8"},
	{[]byte{0xfe, 0xff}, "utf-16be"},
	{[]byte{0xff, 0xfe}, "utf-16le"},
}

// determineCharset finds the charset of body: a byte order mark, then
// the charset parameter of the Content-Type header (label), then the
// document's own declaration (<meta> for HTML, <?xml encoding?> for XML),
// as browsers do (WHATWG); then, for a body that declares nothing, UTF-8
// if the whole body is valid UTF-8, else statistical detection
// (detectCharset). A declaration is overruled when the body shows it is
// wrong: a body declared in a legacy charset that is valid UTF-8 with
// non-ASCII text is UTF-8 (servers that label every page ISO-8859-1), and
// a body declared UTF-8 that has no valid multi-byte sequence but several
// invalid bytes is detected (pages saved in a legacy charset under a
// UTF-8 template). Unlike x/net/html/charset.DetermineEncoding, the
// UTF-8 check looks at the whole body, not its first kilobyte: pages with
// no declaration are nearly always UTF-8, often with an ASCII-only head.
func determineCharset(body []byte, label string, kind textKind) (e encoding.Encoding, name string, bomLen int) {
	for _, b := range boms {
		if bytes.HasPrefix(body, b.bom) {
			e, name = charset.Lookup(b.name)
			return e, name, len(b.bom)
		}
	}
	if label != "" {
		e, name = charset.Lookup(label)
	}
	if e == nil {
		head := body[:min(len(body), prescanLen)]
		switch kind {
		case htmlText:
			e, name = metaCharset(head)
		case xmlText:
			e, name = xmlCharset(head)
		}
		// Without a BOM, a document that declares UTF-16 in its own
		// ASCII text cannot be UTF-16.
		if e != nil && strings.HasPrefix(name, "utf-16") {
			e, name = charset.Lookup("utf-8")
		}
	}
	if e != nil {
		switch {
		case name != "utf-8" && utf8.Valid(body) && !asciiOnly(body):
			e, name = charset.Lookup("utf-8")
		case name == "utf-8" && utf8Lie(body):
			e, name = detectCharset(body)
		}
		return e, name, 0
	}
	if utf8.Valid(body) {
		e, name = charset.Lookup("utf-8")
		return e, name, 0
	}
	e, name = detectCharset(body)
	return e, name, 0
}

func asciiOnly(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// utf8Lie reports a body that is not UTF-8 at all: no valid multi-byte
// sequence and at least lieMinInvalid invalid ones. A few stray bytes in a
// UTF-8 page are damage, not a lie; they become U+FFFD.
func utf8Lie(b []byte) bool {
	const lieMinInvalid = 3
	invalid := 0
	for i := 0; i < len(b); {
		if b[i] < 0x80 {
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			invalid++
			i++
			continue
		}
		return false // a valid multi-byte sequence
	}
	return invalid >= lieMinInvalid
}

// detectLimit bounds the bytes given to the statistical detector: enough
// text for its models, and a cap on its cost for huge pages.
const detectLimit = 256 << 10

// detectMinConfidence: below it the detector's guess is no better than
// the WHATWG default for undeclared pages, windows-1252.
const detectMinConfidence = 0.5

// detectCharset guesses the charset of a body that is not UTF-8 and does
// not say what it is (or lies), with github.com/wlynxg/chardet, a port of
// Mozilla's universal charset detector as kept in Python's chardet: byte
// sequence models for the CJK multi-byte charsets and letter-frequency
// models for the Cyrillic, Greek, Hebrew, Thai, Turkish and Central
// European single-byte ones. Markup is removed first, so tags and
// attributes do not count as text. Unknown or unsure results fall back to
// windows-1252, the WHATWG default.
func detectCharset(body []byte) (encoding.Encoding, string) {
	text := markupless(body[:min(len(body), detectLimit)])
	r := chardet.Detect(text)
	if r.Confidence >= detectMinConfidence && r.Charset != "" {
		if e, name := charset.Lookup(r.Charset); e != nil && name != "utf-8" && !strings.HasPrefix(name, "utf-16") {
			return e, name
		}
	}
	return charset.Lookup("windows-1252")
}

// markupless is b without tags, comments, and the contents of script and
// style elements: the page's text, as bytes in its own charset.
func markupless(b []byte) []byte {
	out := make([]byte, 0, len(b)/2)
	z := html.NewTokenizer(bytes.NewReader(b))
	skip := false
	for {
		switch z.Next() {
		case html.ErrorToken:
			return out
		case html.TextToken:
			if !skip {
				out = append(out, z.Raw()...)
				out = append(out, ' ')
			}
		case html.StartTagToken:
			name, _ := z.TagName()
			skip = string(name) == "script" || string(name) == "style"
		case html.EndTagToken:
			skip = false
		}
	}
}

// metaCharset is the WHATWG "prescan a byte stream to determine its
// encoding" for <meta charset> and <meta http-equiv=content-type>, after
// x/net/html/charset, which does not export it.
func metaCharset(head []byte) (encoding.Encoding, string) {
	z := html.NewTokenizer(bytes.NewReader(head))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return nil, ""
		case html.StartTagToken, html.SelfClosingTagToken:
			tag, hasAttr := z.TagName()
			if string(tag) != "meta" {
				continue
			}
			seen := make(map[string]bool)
			const (
				unknown = iota
				needPragma
				noPragma
			)
			var label string
			gotPragma, pragma := false, unknown
			for hasAttr {
				var key, val []byte
				key, val, hasAttr = z.TagAttr()
				k := string(key)
				if seen[k] {
					continue
				}
				seen[k] = true
				v := strings.ToLower(string(val))
				switch k {
				case "http-equiv":
					gotPragma = v == "content-type"
				case "content":
					if label == "" {
						if l := charsetFromContent(v); l != "" {
							label, pragma = l, needPragma
						}
					}
				case "charset":
					if label == "" {
						label, pragma = v, noPragma
					}
				}
			}
			if pragma == unknown || pragma == needPragma && !gotPragma {
				continue
			}
			if e, name := charset.Lookup(label); e != nil {
				return e, name
			}
		}
	}
}

// charsetFromContent extracts the charset from a <meta content> value
// such as "text/html; charset=shift_jis" (WHATWG "extracting a character
// encoding from a meta element").
func charsetFromContent(s string) string {
	for s != "" {
		i := strings.Index(s, "charset")
		if i < 0 {
			return ""
		}
		s = strings.TrimLeft(s[i+len("charset"):], " \t\n\f\r")
		if !strings.HasPrefix(s, "=") {
			continue
		}
		s = strings.TrimLeft(s[1:], " \t\n\f\r")
		if s == "" {
			return ""
		}
		if q := s[0]; q == '"' || q == '\'' {
			end := strings.IndexByte(s[1:], q)
			if end < 0 {
				return ""
			}
			return s[1 : 1+end]
		}
		if end := strings.IndexAny(s, "; \t\n\f\r"); end >= 0 {
			return s[:end]
		}
		return s
	}
	return ""
}

var xmlEncodingAttr = regexp.MustCompile(`^<\?xml[^>]*?\sencoding\s*=\s*["']([A-Za-z0-9._:-]+)["']`)

// xmlCharset reads the encoding declaration of an XML document.
func xmlCharset(head []byte) (encoding.Encoding, string) {
	m := xmlEncodingAttr.FindSubmatch(head)
	if m == nil {
		return nil, ""
	}
	return charset.Lookup(string(m[1]))
}
