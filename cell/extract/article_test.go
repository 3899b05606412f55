package extract

import (
	"encoding/json"
	"testing"
	"time"
)

// The article rules (article.go, and the title and heading in meta.go),
// one small page each: what a reader sees with no JSON-LD or meta tags.

const articleSchema = `{"type":"object","properties":{"headline":{"type":"string"},"author":{"type":"string"},"date_published":{"type":"string","format":"date"},"date_modified":{"type":"string","format":"date"}}}`

// article reads one field of the article schema from page.
func article(t *testing.T, pageURL, page string, fetched time.Time, field string) any {
	t.Helper()
	plan, err := (&Request{URL: "http://x/", Schema: json.RawMessage(articleSchema)}).Check()
	if err != nil {
		t.Fatal(err)
	}
	m, _ := Deterministic(Page{URL: pageURL, HTML: page, Fetched: fetched}, plan).(map[string]any)
	return m[field]
}

func TestArticleDate(t *testing.T) {
	sidebar := `<div class="recent"><a href="/a">Older story</a> <span class="date">March 3, 2017</span></div>`
	for _, c := range []struct {
		name, url, page string
		fetched         time.Time
		want            any
	}{
		{"the updated date loses to the published one",
			"https://news.example/story",
			`<h1>Rates rise again</h1><p class="meta"><span class="updated">Updated Nov 13, 2019</span> <span>Published Nov 8, 2019</span></p><p>Text.</p>`,
			time.Time{}, "2019-11-08"},
		{"the time element in the byline, not the sidebar's date before it",
			"https://news.example/story",
			sidebar + `<article><h1>Rates rise again</h1><div class="byline">By Ann Lee <time datetime="2021-05-04T09:00:00+02:00">4 May</time></div><p>Text.</p></article>`,
			time.Time{}, "2021-05-04"},
		{"the URL's day over an updated date",
			"https://news.example/2019/11/8/12345/rates",
			`<h1>Rates rise again</h1><p>Updated November 13, 2019</p><p>Text.</p>`,
			time.Time{}, "2019-11-08"},
		{"a German date next to the headline",
			"https://zeitung.example/artikel",
			sidebar + `<h1>Die Zinsen steigen</h1><p>mh</p><p>15. Oktober 2023</p><p>Text.</p>`,
			time.Time{}, "2023-10-15"},
		{"a dotted date is day first",
			"https://zeitung.example/artikel",
			`<h1>Die Zinsen steigen</h1><p>06.11.2023 | 10:15</p><p>Text.</p>`,
			time.Time{}, "2023-11-06"},
		{"a dotted date with a two-digit year",
			"https://zeitung.example/artikel",
			`<h1>Die Zinsen steigen</h1><p><time class="label">19.10.19, 08:16 Uhr</time></p><p>Text.</p>`,
			time.Time{}, "2019-10-19"},
		{"a version number is no date",
			"https://zeitung.example/artikel",
			`<h1>Die Zinsen steigen</h1><p>Version 1.10.19.2 ist da</p><p>Text.</p>`,
			time.Time{}, nil},
		{"a relative date against the fetch time",
			"https://news.example/story",
			`<h1>Rates rise again</h1><p>3 hours ago</p><p>Text.</p>`,
			time.Date(2024, 3, 1, 1, 0, 0, 0, time.UTC), "2024-02-29"},
		{"no fetch time, no relative date",
			"https://news.example/story",
			`<h1>Rates rise again</h1><p>3 hours ago</p><p>Text.</p>`,
			time.Time{}, nil},
		{"a comment's date is not the article's, though nearer",
			"https://news.example/story",
			`<p class="dateline">April 1, 2022</p><h1>Rates rise again</h1><p>Short.</p><div class="comments"><p>May 2, 2022</p></div>`,
			time.Time{}, "2022-04-01"},
	} {
		if got := article(t, c.url, c.page, c.fetched, "date_published"); got != c.want {
			t.Errorf("%s: date_published = %v, want %v", c.name, got, c.want)
		}
	}
	// The updated date is the page's date_modified.
	page := `<h1>Rates rise again</h1><p class="meta"><span class="updated">Updated Nov 13, 2019</span> <span>Published Nov 8, 2019</span></p>`
	if got := article(t, "https://news.example/story", page, time.Time{}, "date_modified"); got != "2019-11-13" {
		t.Errorf("date_modified = %v, want 2019-11-13", got)
	}
}

func TestArticleAuthor(t *testing.T) {
	for _, c := range []struct{ name, page, want string }{
		{"a By line", `<h1>Rates rise</h1><p>By Jane Doe</p><p>Text.</p>`, "Jane Doe"},
		{"By and a linked name", `<h1>Rates rise</h1><p>By <a href="/p/jd">Jane Doe</a>, Reuters</p>`, "Jane Doe"},
		{"a German byline", `<h1>Zinsen</h1><p>Von Max Muster</p>`, "Max Muster"},
		{"rel=author", `<h1>Rates rise</h1><div><a rel="author" href="/p/jd">Jane Doe</a></div>`, "Jane Doe"},
		{"itemprop=author shown", `<h1>Rates rise</h1><span itemprop="author">Jane Doe</span>`, "Jane Doe"},
		{"a role under the name", `<h1>Rates rise</h1><div class="author-info"><div class="author">Staff Writer<br>Meg James</div></div>`, "Meg James"},
		{"a handle beside the name", `<h1>Rates rise</h1><div class="byline"><span class="author-handle">@janed</span></div><div class="author-name">Jane Doe</div>`, "Jane Doe"},
		{"a name and its handle", `<h1>Rates rise</h1><p class="byline">Megan Rowe meganr</p>`, "Megan Rowe"},
		{"a byline with the date first", `<h1>Rates rise</h1><div class="byline">Monday November 18, 2019 7:45 am PST by <a class="author-url" href="/a/jr">Joe Rossignol</a></div>`, "Joe Rossignol"},
		{"the byline near the headline, not a commenter", `<h1>Rates rise</h1><p>By Jane Doe</p><p>Text.</p><div class="comments"><p>By Troll King</p></div>`, "Jane Doe"},
		{"the author element holds the avatar too", `<h1>Zinsen</h1><ul><li class="article_author prefix"><p>Von</p></li><li class="article_author"><a href="/p/1"><div class="author_image"><img alt="img_0450"></div><span class="label">Simon Braasch</span></a></li></ul>`, "Simon Braasch"},
		{"a label element and the name after it", `<h1>Zinsen</h1><div><h5>Autor: </h5>Peter Maahn/SP-X</div>`, "Peter Maahn"},
		{"a name before the date", `<h1>Zinsen</h1><div class="article-date">Swantje Schemmerling | 06.11.23</div>`, "Swantje Schemmerling"},
		{"a link to the author's page", `<h1>Autos robados</h1><h6><a href="/autor/ariel-melgar-cabrera_7617"><strong>Ariel Melgar Cabrera</strong></a></h6>`, "Ariel Melgar Cabrera"},
		{"a label glued to the name", `<h1>Zinsen</h1><div class="author">AuthorAndreas Kalt</div>`, "Andreas Kalt"},
		{"the page's <h1> anchors the byline when the <title> names another headline", `<head><title>Stadt verklagt Baufirma wegen Pflastersteinen | Anzeiger</title></head><body><h1>Pflaster-Desaster in der Fußgängerzone</h1><p>Von Claus Boelen-Theile</p></body>`, "Claus Boelen-Theile"},
	} {
		got, _ := article(t, "https://news.example/story", c.page, time.Time{}, "author").(string)
		if got != c.want {
			t.Errorf("%s: author = %q, want %q", c.name, got, c.want)
		}
	}
	// An author's page is no name; a date's label in an author element
	// neither.
	for name, page := range map[string]string{
		"microdata's author link": `<h1>Rates rise</h1><div itemscope itemtype="https://schema.org/Article"><a itemprop="author" href="https://news.example/author/jon-nitz/"></a></div>`,
		"a date's label":          `<h1>Zinsen</h1><div class="author">Veröffentlicht am</div>`,
	} {
		if got := article(t, "https://news.example/story", page, time.Time{}, "author"); got != nil {
			t.Errorf("%s: author = %v, want none", name, got)
		}
	}
	// A comment form's label is no author.
	form := `<h1>Rates rise</h1><p>Text.</p><form><label class="author">Name *</label><input name="author"></form>`
	if got := article(t, "https://news.example/story", form, time.Time{}, "author"); got != nil {
		t.Errorf("a form label: author = %v, want none", got)
	}
}

func TestLocalizedDates(t *testing.T) {
	for in, want := range map[string]string{
		"15. Oktober 2023":      "2023-10-15",
		"3 janvier 2020":        "2020-01-03",
		"1er mars 2020":         "2020-03-01",
		"12 de marzo de 2019":   "2019-03-12",
		"5 de março de 2021":    "2021-03-05",
		"7 settembre 2022":      "2022-09-07",
		"15 października 2023":  "2023-10-15",
		"15 октября 2023 г.":    "2023-10-15",
		"4 mei 2021":            "2021-05-04",
		"1. März 2020":          "2020-03-01",
		"06.11.2023":            "2023-11-06",
		"01. 11. 2023":          "2023-11-01",
		"Posted 2023-11-06":     "2023-11-06",
		"Oktober 15, 2023":      "2023-10-15",
		"am 31. Mai 2012 um 9h": "2012-05-31",
	} {
		if got, ok := parseDate(in); !ok || got != want {
			t.Errorf("parseDate(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for in, want := range map[string]string{
		"https://x.example/2019/11/8/123/slug":    "2019-11-08",
		"https://x.example/story/2019-11-19/slug": "2019-11-19",
		"https://x.example/2019/11/slug":          "",
	} {
		if got, _ := dateFromURL(in); got != want {
			t.Errorf("dateFromURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestArticleHeadline(t *testing.T) {
	for _, c := range []struct{ name, page, want string }{
		{"the h1 over the title", `<title>Rates rise again, banks say | Daily</title><h1>Rates rise again</h1>`, "Rates rise again"},
		{"the site's name in an h1 is not the headline",
			`<title>September open thread - The Example Blog</title><h1>The Example Blog</h1><article><h1>September open thread</h1></article>`,
			"September open thread"},
		{"a logo h1 and the headline in an h2: the title without the site's name",
			`<title>With shattered dreams, deportees return | News</title><h1>News</h1><h2>With shattered dreams, deportees return</h2>`,
			"With shattered dreams, deportees return"},
		{"the kicker is not part of the headline",
			`<title>Klimaschutz: Bohren, bis es heiß wird</title><h1><span class="article-heading__kicker">Klimaschutz</span><span class="visually-hidden">: </span><span>Bohren, bis es heiß wird</span></h1>`,
			"Bohren, bis es heiß wird"},
		{"a title that is only the site's name: the article's h1",
			`<title>News</title><h1><a href="/">News</a></h1><article><h1>Cells that taste danger</h1></article>`,
			"Cells that taste danger"},
		{"the h1 that says the title's headline part, not its site part",
			`<title>Need for Speed – Insubordinate Thinking</title><h1>Insubordinate Thinking</h1><article><h1>Need for Speed</h1></article>`,
			"Need for Speed"},
		{"the author's microdata name is not the headline",
			`<title>Browns player on the fight - Sports</title><article itemscope itemtype="https://schema.org/NewsArticle"><h1>Browns player on the fight</h1><div itemprop="author" itemscope itemtype="https://schema.org/Person"><span itemprop="name">Bryan Doe</span></div></article>`,
			"Browns player on the fight"},
		{"soft hyphens are no text",
			`<title>Erinnerung an die Opfer</title><h1>Er­in­ne­rung an die Op­fer</h1>`,
			"Erinnerung an die Opfer"},
		{"the comment form's heading is not the headline",
			`<title>Unbefriedigt</title><article><p>Text.</p></article><div id="comments" class="comments-area"><div id="respond" class="comment-respond"><h3 id="reply-title" class="comment-reply-title">Schreibe einen Kommentar</h3></div></div>`,
			"Unbefriedigt"},
		{"a site builder's styles on <body> do not make a page comments",
			`<title>Impressum - Agentur</title><body class="j-m-comment-styles-disabled"><h1>Impressum</h1></body>`,
			"Impressum"},
	} {
		got, _ := article(t, "https://news.example/story", c.page, time.Time{}, "headline").(string)
		if got != c.want {
			t.Errorf("%s: headline = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestBylineNames(t *testing.T) {
	for in, want := range map[string]string{
		"ByJ.R. Stone":                     "J.R. Stone",
		"porRedaccion":                     "Redaccion",
		"Erstellt von Andri Bryner":        "Andri Bryner",
		"von Rudolf Fischer, Simon Kohler": "Rudolf Fischer, Simon Kohler",
		"Von Isabella Bauer am Samstag":    "Isabella Bauer",
		"Autor: Max Muster":                "Max Muster",
		"责任编辑：孔德明":                         "孔德明",
		"Written by Jane Doe | Reuters":    "Jane Doe",
		"Oktober":                          "",
		"Aylin sagt":                       "",
		"Follow Us":                        "",
		"Name *":                           "",
		"Publiziert am":                    "",
		"Monday":                           "",
	} {
		if got := personName(in, true); got != want {
			t.Errorf("personName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDayFirstPages(t *testing.T) {
	es := `<html lang="es"><h1>Candidatos en la universidad</h1><p>03/05/2022 10:15</p></html>`
	if got := article(t, "https://diario.example/nota", es, time.Time{}, "date_published"); got != "2022-05-03" {
		t.Errorf("a Spanish page's 03/05/2022 = %v, want 2022-05-03", got)
	}
	us := `<html lang="en-US"><h1>Candidates at the university</h1><p>03/05/2022 10:15</p></html>`
	if got := article(t, "https://news.example/story", us, time.Time{}, "date_published"); got != "2022-03-05" {
		t.Errorf("a US page's 03/05/2022 = %v, want 2022-03-05", got)
	}
}

// Where meta tags state the date and author, they stay the first source,
// whatever the page shows.
func TestArticleMetaFirst(t *testing.T) {
	page := `<head><meta name="pubdate" content="2019-11-07"><meta name="author" content="Ann Lee"></head>
<h1>Rates rise again</h1><p>By Jane Doe</p><p>Published November 8, 2019</p>`
	if got := article(t, "https://news.example/2019/11/9/rates", page, time.Time{}, "date_published"); got != "2019-11-07" {
		t.Errorf("date_published = %v, want the meta tag's 2019-11-07", got)
	}
	if got := article(t, "https://news.example/2019/11/9/rates", page, time.Time{}, "author"); got != "Ann Lee" {
		t.Errorf("author = %v, want the meta tag's Ann Lee", got)
	}
}

// An author item's type is not its name.
func TestAuthorItemType(t *testing.T) {
	page := `<article itemscope itemtype="https://schema.org/NewsArticle"><h1>Prison to close</h1>
<div itemprop="author" itemscope itemtype="https://schema.org/Person"><span class="author-name">James Whittaker</span></div></article>`
	if got := article(t, "https://news.example/story", page, time.Time{}, "author"); got != "James Whittaker" {
		t.Errorf("author = %v, want James Whittaker", got)
	}
}
