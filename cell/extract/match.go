package extract

import (
	"strings"
	"unicode"
)

// Sources of a fact, best first: a property found in several places is
// taken from the best one.
const (
	srcJSONLD = iota
	srcMicrodata
	srcRDFa
	srcMeta
	srcHeading
	srcTable // tables, definition lists, lists under a heading
	srcLabel // "label: value" lines
	srcClass // an element whose class, id or rel names the field
	srcText  // the page title, typed values anywhere in the text
	srcWeak  // JSON-LD entities that describe the site, not the page
)

// fact is one named value a page shows.
type fact struct {
	key string // normalised words ("date published")
	val any    // string, or JSON-LD/microdata map[string]any / []any
	src int
}

// words normalises a name: camelCase and snake_case split, lower case,
// prefixes of vocabularies dropped ("og:title" → "title",
// "article:published_time" → "published time", "schema:price" → "price").
func words(s string) string {
	if i := strings.LastIndexAny(s, "/#"); i >= 0 && strings.Contains(s, "schema.org") {
		s = s[i+1:]
	}
	if i := strings.IndexByte(s, ':'); i >= 0 && i < len(s)-1 {
		switch strings.ToLower(s[:i]) {
		case "og", "article", "twitter", "product", "book", "profile", "music", "video", "schema", "dc", "dcterms", "itemprop", "business", "place":
			s = s[i+1:]
		}
	}
	var b strings.Builder
	prevLower := false
	for _, r := range s {
		switch {
		case unicode.IsUpper(r):
			if prevLower {
				b.WriteByte(' ')
			}
			b.WriteRune(unicode.ToLower(r))
			prevLower = false
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
			prevLower = unicode.IsLower(r) || unicode.IsDigit(r)
		default:
			b.WriteByte(' ')
			prevLower = false
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// groups are the synonyms of common fields: a property matches a fact
// of any name of its group.
var groups = [][]string{
	{"name", "title", "headline", "heading", "product name", "item name", "page title"},
	{"author", "authors", "by", "byline", "creator", "writer", "written by", "posted by", "author name"},
	{"date published", "published", "publish date", "published date", "publication date", "pub date", "pubdate", "published time", "release date", "date", "posted", "posted on", "published on", "time", "date created", "upload date"},
	{"date modified", "modified", "modified time", "updated", "last updated", "updated time", "last modified"},
	{"price", "offers price", "cost", "amount", "sale price", "current price", "low price"},
	{"currency", "price currency", "offers price currency"},
	{"description", "summary", "abstract", "about"},
	{"image", "image url", "thumbnail", "thumbnail url", "photo", "picture"},
	{"url", "link", "href", "canonical", "website", "homepage", "web site"},
	{"email", "e mail", "mail", "email address"},
	{"telephone", "phone", "phone number", "tel", "mobile", "contact number"},
	{"in stock", "availability", "offers availability", "stock", "available", "is available"},
	{"rating", "rating value", "aggregate rating rating value", "stars", "score", "average rating"},
	{"review count", "reviews", "aggregate rating review count", "rating count", "number of reviews"},
	{"brand", "brand name", "manufacturer", "make"},
	{"sku", "product id", "item number", "model number", "mpn"},
	{"address", "street address", "location"},
	{"start date", "starts", "start", "begins", "event date"},
	{"end date", "ends", "end"},
	{"ingredients", "recipe ingredient", "recipe ingredients"},
	{"cook time", "cooking time"},
	{"prep time", "preparation time"},
	{"total time"},
	{"keywords", "tags", "topics"},
	{"section", "article section", "category"},
	{"language", "in language", "locale"},
	{"publisher", "publisher name", "site name", "source"},
}

var groupOf = func() map[string]int {
	m := map[string]int{}
	for i, g := range groups {
		for _, w := range g {
			m[w] = i + 1
		}
	}
	return m
}()

// score says how well a fact's key matches a property name (both
// normalised): 0 none, up to 100 the same name.
func score(prop, key string) int {
	switch {
	case prop == key:
		return 100
	case groupOf[prop] != 0 && groupOf[prop] == groupOf[key]:
		return 80
	}
	pw, kw := strings.Fields(prop), strings.Fields(key)
	if len(pw) == 0 || len(kw) == 0 {
		return 0
	}
	if kw[len(kw)-1] == "type" && !strings.Contains(" "+prop+" ", " type ") {
		return 0 // "author type" (an item's type, "Person") is no author
	}
	if groupOf[prop] == groupOf["name"] && len(kw) > 1 && party[kw[len(kw)-2]] && !strings.Contains(" "+prop+" ", " "+kw[len(kw)-2]+" ") {
		return 0 // "author name" is not the article's "headline" or "name"
	}
	if strings.HasSuffix(" "+key, " "+prop) {
		return 60 // "offers price" for "price"
	}
	if g := groupOf[kw[len(kw)-1]]; g != 0 && g == groupOf[prop] {
		return 55 // "article author" for "writer"
	}
	if containsAll(kw, pw) {
		return 50
	}
	if containsAll(pw, kw) && len(kw) > 0 && !stop[key] {
		return 40
	}
	return 0
}

// stop are keys too vague to stand for a longer property name.
var stop = map[string]bool{"type": true, "id": true, "value": true, "text": true, "item": true, "content": true}

func containsAll(hay, needles []string) bool {
	for _, n := range needles {
		found := false
		for _, h := range hay {
			if h == n || singular(h) == singular(n) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func singular(w string) string {
	switch {
	case strings.HasSuffix(w, "ies") && len(w) > 4:
		return w[:len(w)-3] + "y"
	case strings.HasSuffix(w, "ses") || strings.HasSuffix(w, "xes"):
		return w[:len(w)-2]
	case strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && len(w) > 3:
		return w[:len(w)-1]
	}
	return w
}

// kindOf says what a property holds, from its name: "date", "email",
// "phone", "url", "price", "bool" or "".
func kindOf(name string) string {
	w := " " + words(name) + " "
	has := func(s ...string) bool {
		for _, x := range s {
			if strings.Contains(w, " "+x+" ") {
				return true
			}
		}
		return false
	}
	switch {
	case has("email", "e mail", "mail"):
		return "email"
	case has("phone", "telephone", "tel", "mobile", "fax"):
		return "phone"
	case has("url", "link", "href", "website", "homepage", "image", "thumbnail", "logo", "photo", "src"):
		return "url"
	case has("date", "published", "modified", "updated", "created", "posted", "released", "birthday", "deadline", "starts", "ends") || strings.HasSuffix(strings.TrimSpace(w), " at") || strings.HasSuffix(strings.TrimSpace(w), " on"):
		return "date"
	case has("price", "cost", "amount", "fee", "salary", "total"):
		return "price"
	case strings.HasPrefix(w, " is ") || strings.HasPrefix(w, " has ") || strings.HasPrefix(w, " can ") || has("in stock", "available", "enabled", "active"):
		return "bool"
	}
	return ""
}
