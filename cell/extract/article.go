package extract

import (
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/PuerkitoBio/goquery"
	"golang.org/x/net/html"

	"github.com/trawlhq/trawl/internal/htmlread"
)

// An article's publish date and author as its reader sees them, for pages
// whose JSON-LD and meta tags say nothing (or are gone): the page's own
// forms, read where an article shows them — next to its headline.
//
// A page shows many dates and names: the site's "today", other stories'
// dates in a sidebar, comments' dates and commenters. The byline is the
// one next to the headline, so each candidate is weighed by its distance
// in visible text from the headline, and by what it says it is
// ("Updated", rel=author, a class naming a byline). The result is one
// fact per field at srcHeading: after JSON-LD, microdata, RDFa and meta
// tags (which stay the first source), before "label: value" lines and
// class names anywhere on the page.

// Distances are in bytes of visible text. A byline is within a few
// hundred of the headline; farther than maxDist is another part of the
// page.
const (
	maxDist = 2500
	// A date or name above the headline (a kicker, a breadcrumb with a
	// date) counts this many times its distance.
	beforeWeight = 3
)

// candidate is a date or name the page shows, and where.
type candidate struct {
	val  string
	at   int // visible-text offset
	kind int // for dates: published, updated or unknown
	// strong: the page says what it is (rel=author, a class naming an
	// author or a byline, pubdate, "Published"); it wins over a plain
	// value at up to twice the distance.
	strong bool
}

const (
	dateUnknown = iota
	datePublished
	dateUpdated
)

// textPos is the visible text of the body with each element's start and
// end offset in it.
type textPos struct {
	start, end map[*html.Node]int
	n          int
}

func (tp *textPos) walk(n *html.Node) {
	switch n.Type {
	case html.TextNode:
		tp.start[n] = tp.n
		tp.n += len(strings.TrimSpace(n.Data))
		return
	case html.ElementNode:
		switch n.Data {
		case "script", "style", "noscript", "template", "svg", "head":
			return
		}
		tp.start[n] = tp.n
		defer func() { tp.end[n] = tp.n }()
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		tp.walk(c)
	}
}

// article adds the "published", "modified" and "byline" facts read
// around the headline, and the URL's date. Their keys are synonyms of
// date_published, date_modified and author, not the names themselves: a
// meta tag under a synonym ("pubdate", "article:published_time") must
// still win, and across sources an exact name would outrank it.
func (p *page) article(doc *goquery.Document, fetched time.Time) {
	if lang, ok := doc.Find("html").First().Attr("lang"); ok {
		p.dayFirst = dayFirstLang(lang)
	}
	if p.base != nil {
		if d, ok := dateFromURL(p.base.Path); ok {
			// A date in the path is the day the site filed the story
			// under: what it published, whatever it updated since.
			p.add("published", d, srcHeading)
		}
	}
	anchor := p.headingNode
	if anchor == nil {
		anchor = mainHeading(doc)
	}
	if anchor == nil {
		return
	}
	tp := &textPos{start: map[*html.Node]int{}, end: map[*html.Node]int{}}
	for _, n := range doc.Nodes {
		tp.walk(n)
	}
	hs, ok := tp.start[anchor]
	if !ok {
		return
	}
	he := tp.end[anchor]
	dist := func(at int) int {
		switch {
		case at >= he:
			return at - he
		case at < hs:
			return (hs - at) * beforeWeight
		}
		return -1 // inside the headline: not a byline
	}
	var dates, names []candidate
	doc.Find("body").Each(func(_ int, body *goquery.Selection) {
		p.collect(body.Nodes[0], tp, fetched, &dates, &names)
	})
	best := func(cs []candidate, keep func(candidate) bool) (string, bool) {
		bestVal, bestD := "", -1
		for _, c := range cs {
			d := dist(c.at)
			if d < 0 || d > maxDist || !keep(c) {
				continue
			}
			if c.strong {
				d /= 2
			}
			if bestD < 0 || d < bestD {
				bestVal, bestD = c.val, d
			}
		}
		return bestVal, bestD >= 0
	}
	if d, ok := best(dates, func(c candidate) bool { return c.kind != dateUpdated }); ok {
		p.add("published", d, srcHeading)
	} else if d, ok := best(dates, func(c candidate) bool { return true }); ok {
		// Only an "updated" date near the headline: the best the page
		// says about when the article is from.
		p.add("published", d, srcHeading)
	}
	if d, ok := best(dates, func(c candidate) bool { return c.kind == dateUpdated }); ok {
		p.add("modified", d, srcHeading)
	}
	if a, ok := best(names, func(candidate) bool { return true }); ok {
		p.add("byline", a, srcHeading)
	}
}

// mainHeading is where the byline and the date are looked for when no
// heading says what the <title> says (an SEO title over a different
// <h1>, a kicker and a headline in one <h2>): the article's first <h1>,
// else the page's, else the article's first <h2>. It is an anchor only;
// the headline stays the title's.
func mainHeading(doc *goquery.Document) *html.Node {
	for _, sel := range []string{"article h1, main h1, [role=main] h1", "body h1", "article h2, main h2, [role=main] h2"} {
		if h := doc.Find(sel).First(); h.Length() > 0 && headingText(h.Nodes[0]) != "" {
			return h.Nodes[0]
		}
	}
	return nil
}

var (
	reUpdated   = regexp.MustCompile(`(?i)updated|modified|last edit|aktualisiert|geändert|mis à jour|actualizado|actualizada|aggiornat|atualizad|bijgewerkt|zaktualizowano|обновлен`)
	rePublished = regexp.MustCompile(`(?i)publish|posted|pubdate|created|erschienen|veröffentlicht|publié|publicado|publicada|pubblicat|gepubliceerd|opublikowano|опубликован`)
	// Words of a class, id or itemprop that say an element is outside
	// the article: comments, related stories, navigation.
	reElsewhere = regexp.MustCompile(`(?i)comment|related|sidebar|widget|recommend|popular|trending|footer|newsletter|teaser|promo|most read|more stories`)
)

// collect walks the body for dates (time elements, text that reads as a
// date) and names (rel=author links, elements a class calls an author
// or byline, "By …" lines) and where each is.
func (p *page) collect(n *html.Node, tp *textPos, fetched time.Time, dates, names *[]candidate) {
	var walk func(n *html.Node, elsewhere bool)
	walk = func(n *html.Node, elsewhere bool) {
		if n.Type == html.TextNode {
			if elsewhere {
				return
			}
			t := htmlread.Collapse(n.Data)
			if t == "" || len(t) > 200 {
				return
			}
			at := tp.start[n]
			var d string
			var ok bool
			if strings.ContainsAny(t, "0123456789") {
				d, ok = parseDateIn(t, p.dayFirst)
			}
			if !ok && !fetched.IsZero() {
				d, ok = relativeDate(t, fetched)
			}
			if ok {
				ctx := t + " " + contextWords(n.Parent)
				*dates = append(*dates, candidate{val: d, at: at, kind: dateKind(ctx), strong: rePublished.MatchString(ctx)})
			}
			if m := reByline.FindStringSubmatch(t); m != nil {
				if name := personName(m[1], false); name != "" {
					*names = append(*names, candidate{val: name, at: at, strong: true})
				}
			} else if reBylineWord.MatchString(t) {
				// "By <a>Jane Doe</a>": the name is what comes next, an
				// element or text; "<h5>Autor:</h5> Peter Maahn": next
				// after the label's element.
				next := nextText(n)
				if i := strings.IndexAny(next, "|/•·"); i > 0 {
					next = next[:i] // "Peter Maahn/SP-X": the name, not the agency
				}
				if name := personName(next, false); name != "" {
					*names = append(*names, candidate{val: name, at: at, strong: true})
				}
			} else if ok {
				// "Swantje Schemmerling | 06.11.23": a name before a
				// date, set apart by a bar or a dot.
				if m := reNameBeforeDate.FindStringSubmatch(t); m != nil {
					if name := personName(m[1], false); name != "" && len(strings.Fields(name)) >= 2 && len(strings.Fields(name)) <= 4 {
						*names = append(*names, candidate{val: name, at: at})
					}
				}
			}
			return
		}
		if n.Type != html.ElementNode {
			return
		}
		switch n.Data {
		case "script", "style", "noscript", "template", "svg", "nav", "aside", "form", "select", "button", "label", "input", "textarea":
			return
		}
		h := hintAttrs(n)
		if reElsewhere.MatchString(h) {
			elsewhere = true
		}
		if !elsewhere {
			at := tp.start[n]
			switch {
			case n.Data == "time":
				d, ok := parseDate(attrOf(n, "datetime"))
				if !ok {
					d, ok = parseDateIn(htmlread.InnerText(n), p.dayFirst)
				}
				if ok {
					ctx := h + " " + contextWords(n.Parent) + " " + prevText(n)
					_, pub := attrOK(n, "pubdate")
					*dates = append(*dates, candidate{val: d, at: at, kind: dateKind(ctx), strong: pub || rePublished.MatchString(ctx)})
				}
				return
			case n.Data == "a" && (strings.Contains(" "+strings.ToLower(attrOf(n, "rel"))+" ", " author ") || reAuthorPath.MatchString(attrOf(n, "href"))):
				if name := personName(htmlread.InnerText(n), true); name != "" {
					*names = append(*names, candidate{val: name, at: at, strong: true})
				}
				return
			case hasWord(" "+words(h)+" ", "author", "byline", "writer", "autor", "auteur", "autore", "reporter", "by line"):
				if !isPicture(h) && !hasWord(" "+words(h)+" ", "bio", "description") && !hasInnerAuthor(n) {
					if name := authorName(htmlread.VisibleText(n)); name != "" {
						if name = personName(name, true); name != "" {
							*names = append(*names, candidate{val: name, at: at, strong: true})
						}
					}
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, elsewhere)
		}
	}
	walk(n, false)
}

// reNameBeforeDate is the text before a bar, a middle dot or a bullet
// that a date follows.
var reNameBeforeDate = regexp.MustCompile(`^([^|·•]{3,60}?)\s+[|·•]\s+\S*\d`)

// nextText is the text that follows the text node n: its next sibling
// with text, or, when n ends its element, what follows that element.
func nextText(n *html.Node) string {
	for x := n; x != nil; x = x.Parent {
		for s := x.NextSibling; s != nil; s = s.NextSibling {
			t := strings.TrimSpace(s.Data)
			if s.Type == html.ElementNode {
				t = strings.TrimSpace(htmlread.InnerText(s))
			} else if s.Type != html.TextNode {
				continue
			}
			if t != "" {
				return t
			}
		}
		if x.Parent == nil || x.Parent.Type != html.ElementNode || blockish(x.Parent.Data) {
			break
		}
	}
	return ""
}

// blockish: a label inside it is not followed by what follows it.
func blockish(tag string) bool {
	switch tag {
	case "p", "div", "li", "td", "th", "section", "article", "header", "body", "ul", "ol", "table", "tr":
		return true
	}
	return false
}

// reAuthorPath is a link to an author's page ("/author/jane-doe/",
// "/autor/ariel-melgar-cabrera_7617"): its text is the author's name.
var reAuthorPath = regexp.MustCompile(`(?i)/(?:authors?|autor|autoren|autorin|auteurs?|autore|autori|redakteur|journalist)/[^/?#]+`)

// isPicture: the hint attributes h call an element the author's picture
// (an avatar, a photo), which holds no name to read.
func isPicture(h string) bool {
	return hasWord(" "+words(h)+" ", "avatar", "image", "photo", "img", "picture", "thumb")
}

// hasInnerAuthor: an element inside n is the author's (a byline with
// the date and a linked name): the name is read there.
func hasInnerAuthor(n *html.Node) bool {
	var found bool
	var walk func(*html.Node)
	walk = func(c *html.Node) {
		for c = c.FirstChild; c != nil && !found; c = c.NextSibling {
			if c.Type != html.ElementNode {
				continue
			}
			h := hintAttrs(c)
			if strings.Contains(strings.ToLower(h), "author") && !isPicture(h) || strings.Contains(strings.ToLower(attrOf(c, "rel")), "author") {
				found = true
				return
			}
			walk(c)
		}
	}
	walk(n)
	return found
}

// dateKind says whether the words around a date call it the published
// or the updated one.
func dateKind(ctx string) int {
	up, pub := reUpdated.FindStringIndex(ctx), rePublished.FindStringIndex(ctx)
	switch {
	case up != nil && (pub == nil || up[0] < pub[0]):
		return dateUpdated
	case pub != nil:
		return datePublished
	}
	return dateUnknown
}

// contextWords are the class, id, itemprop and rel words of n and its
// two nearest ancestors: "post-date updated" says what a date is.
func contextWords(n *html.Node) string {
	var b strings.Builder
	for i := 0; n != nil && n.Type == html.ElementNode && i < 3; i++ {
		b.WriteString(hintAttrs(n) + " ")
		n = n.Parent
	}
	return b.String()
}

func hintAttrs(n *html.Node) string {
	var b strings.Builder
	for _, a := range n.Attr {
		switch a.Key {
		case "class", "id", "rel", "itemprop", "data-testid":
			b.WriteString(a.Val + " ")
		}
	}
	return b.String()
}

// prevText is the text just before n in its parent ("Updated: <time>").
func prevText(n *html.Node) string {
	for s := n.PrevSibling; s != nil; s = s.PrevSibling {
		if t := strings.TrimSpace(htmlread.InnerText(s)); t != "" || s.Type == html.TextNode && strings.TrimSpace(s.Data) != "" {
			if t == "" {
				t = strings.TrimSpace(s.Data)
			}
			return t[max(0, len(t)-40):]
		}
	}
	return ""
}

func attrOf(n *html.Node, key string) string {
	v, _ := attrOK(n, key)
	return v
}

func attrOK(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

// reByline is a byline in the languages of monthNames: "By Jane Doe",
// "Von Max Muster", "Par Jean Dupont", "Por …", "Di …", "Door …",
// "Autor: …", "Text: …".
var reByline = regexp.MustCompile(`^(?i:by|written by|posted by|words by|story by|von|text von|par|por|di|door|autor:|autorin:|auteur ?:|text:|texto:|av|от)\s+(\p{Lu}[\p{L}.'’-]*(?:\s+(?:\p{Lu}[\p{L}.'’-]*|de|van|von|der|den|da|del|di|la|le|y|and|und|et|e|&|,)){0,8})`)

var reBylineWord = regexp.MustCompile(`^(?i:by|written by|posted by|von|par|por|di|door|autor:?|autorin:?|auteur ?:?|text:|av|от)$`)

var reWeekday = regexp.MustCompile(`(?i)^(?:mon|tues|wednes|thurs|fri|satur|sun)day\b|^(?:montag|dienstag|mittwoch|donnerstag|freitag|samstag|sonntag)$`)

// nameStop are texts an author element or a byline may show that are
// no names: labels of forms and widgets, roles, the words of a byline.
var nameStop = map[string]bool{
	"name": true, "names": true, "email": true, "e mail": true, "website": true, "url": true, "comment": true,
	"comments": true, "author": true, "authors": true, "autor": true, "auteur": true, "by": true, "von": true,
	"par": true, "por": true, "person": true, "share": true, "follow": true, "staff": true, "home": true,
	"menu": true, "search": true, "login": true, "log in": true, "sign in": true, "more": true, "read more": true,
	"view all posts": true, "all posts": true, "posts": true, "contact": true, "about": true, "about the author": true,
	"staff writer": true, "staff reporter": true, "contributor": true, "contributors": true, "editor": true,
	"reporter": true, "columnist": true, "correspondent": true, "guest author": true, "admin": false,
	"follow us": true, "posted": true, "published": true, "publiziert": true, "publiziert am": true, "quelle": true, "source": true,
	"autoreninfo": true, "artikel": true, "rezept": true, "beitrag": true, "auteurs": true, "autoren": true, "autores": true,
	"erstellt": true, "updated": true, "by line": true, "byline": true, "redakteur": true, "editorial": true,
	"имя": true, "nombre": true, "nom": true, "nome": true, "anonymous": true, "anonym": true, "audio": true, "video": true,
	// Labels of a date that an author element holds too.
	"veröffentlicht": true, "veröffentlicht am": true, "datum": true, "stand": true, "posted on": true, "published on": true,
	"updated on": true, "letzte aktualisierung": true, "aktualisiert": true, "aktualisiert am": true, "erstellt am": true,
	"view profile": true, "profile": true, "profil": true, "mehr": true, "weiterlesen": true,
}

// personName is s when it reads as a person's (or a desk's) name, cut
// of a trailing handle or role; "" otherwise. lower allows a name all in
// lower case (a user name, shown where the page says it is an author).
func personName(s string, lower bool) string {
	s = cleanByline(htmlread.Collapse(s))
	s = strings.TrimSpace(strings.TrimRight(s, ".,;:|-–—"))
	if s == "" || len(s) > 80 || strings.ContainsAny(s, "@*:#/\\<>=?!\"“”()[]{}0123456789") {
		return ""
	}
	f := strings.Fields(s)
	// "Megan Rowe meganr": a capitalised name and then a lower-case
	// handle.
	if len(f) >= 3 && isLowerWord(f[len(f)-1]) && !isLowerWord(f[len(f)-2]) && !isLowerWord(f[0]) {
		f = f[:len(f)-1]
		s = strings.Join(f, " ")
	}
	w := strings.ToLower(words(s))
	if len(f) > 8 || nameStop[w] || months[w] != 0 || reWeekday.MatchString(s) {
		return ""
	}
	// "Aylin sagt", "Jane says": a commenter.
	if l := f[len(f)-1]; len(f) > 1 && (strings.EqualFold(l, "sagt") || strings.EqualFold(l, "says") || strings.EqualFold(l, "said") || strings.EqualFold(l, "schreibt") || strings.EqualFold(l, "dit")) {
		return ""
	}
	r, _ := utf8.DecodeRuneInString(s)
	if !unicode.IsLetter(r) {
		return ""
	}
	if !lower && !unicode.IsUpper(r) && unicode.IsUpper(unicode.ToUpper(r)) {
		return ""
	}
	return s
}

func isLowerWord(w string) bool {
	for _, r := range w {
		if !unicode.IsLower(r) {
			return false
		}
	}
	switch w {
	case "de", "van", "von", "der", "den", "da", "del", "di", "la", "le", "y", "e":
		return false
	}
	return true
}

// reRelative is "3 hours ago" and its kin in the languages of
// monthNames; "vor 2 Tagen", "il y a 3 jours", "hace 5 días".
var reRelative = regexp.MustCompile(`(?i)(?:^|[^\p{L}])(?:vor|il y a|hace|há|ha|fa)?\s*(\d{1,3}|an?|one)\s+(minute|min|hour|hr|day|week|month|year|minute|stunde|tag|woche|monat|jahr|heure|jour|semaine|mois|an|minuto|hora|día|dia|semana|mes|mês|año|ano|ora|giorno|settimana|mese|anno)s?(?:n|en|e|i|es)?\s*(ago|fa|atrás)?`)

// relativeDate reads "3 hours ago" (and "vor 3 Stunden", "il y a 3
// jours", "hace 3 días") against the time the page was fetched: the day
// it names, in the fetch time's zone. Without an "ago" word on either
// side it is no date ("3 days" is a duration).
func relativeDate(s string, fetched time.Time) (string, bool) {
	m := reRelative.FindStringSubmatch(s)
	if m == nil {
		return "", false
	}
	low := strings.ToLower(m[0])
	if !strings.Contains(low, "ago") && !strings.Contains(low, "vor") && !strings.Contains(low, "il y a") &&
		!strings.Contains(low, "hace") && !strings.Contains(low, "atrás") && !strings.Contains(low, " fa") && !strings.HasPrefix(strings.TrimSpace(low), "há") {
		return "", false
	}
	n := atoi(m[1])
	if n == 0 {
		n = 1 // "an hour ago", "a day ago"
	}
	unit := strings.ToLower(m[2])
	var t time.Time
	switch unit {
	case "minute", "min", "minuto":
		t = fetched.Add(-time.Duration(n) * time.Minute)
	case "hour", "hr", "stunde", "heure", "hora", "ora":
		t = fetched.Add(-time.Duration(n) * time.Hour)
	case "day", "tag", "jour", "día", "dia", "giorno":
		t = fetched.AddDate(0, 0, -n)
	case "week", "woche", "semaine", "semana", "settimana":
		t = fetched.AddDate(0, 0, -7*n)
	default:
		// Months and years ago: too coarse for a day.
		return "", false
	}
	return t.Format("2006-01-02"), true
}
