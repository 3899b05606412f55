package sitemap

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/temoto/robotstxt"
	"golang.org/x/net/html/charset"
)

// maxRobotsBytes is how much of robots.txt is read: Google's limit.
const maxRobotsBytes = 500 << 10

// errNotSitemap: the document is neither a sitemap, an index, a feed nor a
// text sitemap (an HTML page served for /sitemap.xml, say).
var errNotSitemap = errors.New("not a sitemap")

// docKind is what a sitemap document turned out to be.
type docKind int

const (
	kindNone  docKind = iota
	kindURLs          // <urlset>, a feed or a text sitemap: page URLs
	kindIndex         // <sitemapindex>: sitemap URLs
)

// sitemapDoc is a parsed sitemap document.
type sitemapDoc struct {
	kind docKind
	// locs are, for an index, its sitemaps' URLs as written; otherwise its
	// in-scope page URLs, normalised and without duplicates.
	locs []string
	err  error // a fault after which locs were kept
	cut  bool  // a bound stopped the reading
	full bool  // reading stopped at need

	base    *url.URL        // the document's URL
	need    int             // page URLs that can still be used: reading stops there
	entries int             // entries read, against Bounds.MaxSitemapURLs
	seen    map[string]bool // locs of a page sitemap
}

type sitemapJob struct {
	url   string
	depth int
}

// robotsSitemaps reads the Sitemap lines of the start host's robots.txt. A
// missing or unreadable robots.txt names none.
func (m *mapper) robotsSitemaps(ctx context.Context, start *url.URL) ([]string, error) {
	robots := (&url.URL{Scheme: start.Scheme, Host: start.Host, Path: "/robots.txt"}).String()
	status, _, body, err := m.get(ctx, robots)
	if err != nil || status < 200 || status > 299 {
		return nil, ctx.Err()
	}
	if len(body) > maxRobotsBytes {
		body = body[:maxRobotsBytes]
	}
	rd, err := robotstxt.FromBytes(body)
	if err != nil {
		return nil, nil
	}
	return rd.Sitemaps, nil
}

// collectSitemaps returns the in-scope page URLs of the site's sitemaps,
// normalised and deduplicated, in document order, at most m.cap of them.
func (m *mapper) collectSitemaps(ctx context.Context, start *url.URL) ([]string, error) {
	named, err := m.robotsSitemaps(ctx, start)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", m.req.URL, err)
	}
	root := &url.URL{Scheme: start.Scheme, Host: start.Host, Path: "/"}
	if len(named) == 0 {
		named = []string{root.JoinPath("sitemap.xml").String(), root.JoinPath("sitemap_index.xml").String()}
	}
	queued := map[string]bool{}
	var queue []sitemapJob
	push := func(base *url.URL, raw string, depth int) {
		u := resolve(base, raw)
		if u == nil {
			return
		}
		u.Fragment = ""
		s := u.String()
		if queued[s] {
			return
		}
		if len(queued) >= m.b.MaxSitemaps {
			m.markTruncated()
			return
		}
		queued[s] = true
		queue = append(queue, sitemapJob{url: s, depth: depth})
	}
	for _, s := range named {
		push(root, s, 0)
	}

	// Reaching m.cap is a truncation when it is not just the Limit.
	capCuts := m.cap < m.req.Limit || m.req.Search != ""
	var out []string
	seen := map[string]bool{}
	for len(queue) > 0 && len(out) < m.cap {
		n := min(len(queue), m.b.Concurrency)
		batch := queue[:n]
		queue = queue[n:]
		docs := make([]sitemapDoc, n)
		// No document of the batch can add more than need URLs: it reads
		// that many distinct ones at most, and those it shares with the
		// documents before it were counted there.
		need := m.cap - len(out)
		var wg sync.WaitGroup
		for i, job := range batch {
			wg.Go(func() { docs[i] = m.readSitemap(ctx, job.url, need) })
		}
		wg.Wait()
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("map %s: %w", m.req.URL, err)
		}
		for i, d := range docs {
			base, _ := url.Parse(batch[i].url)
			switch d.kind {
			case kindIndex:
				if batch[i].depth >= m.b.MaxDepth {
					m.markTruncated()
					continue
				}
				for _, l := range d.locs {
					push(base, l, batch[i].depth+1)
				}
				if d.cut {
					m.markTruncated()
				}
			case kindURLs:
				full := true
				for _, u := range d.locs {
					if seen[u] {
						continue
					}
					if len(out) >= m.cap {
						full = false
						break
					}
					seen[u] = true
					out = append(out, u)
				}
				// A document cut by a bound matters only when all it gave
				// was taken.
				if (full && d.cut) || ((!full || d.full) && capCuts) {
					m.markTruncated()
				}
			}
		}
	}
	if len(queue) > 0 && capCuts {
		m.markTruncated()
	}
	return out, nil
}

// readSitemap fetches and parses one document. A failure is a document of
// kind none: the caller skips it.
func (m *mapper) readSitemap(ctx context.Context, u string, need int) sitemapDoc {
	status, _, body, err := m.get(ctx, u)
	if err != nil || status < 200 || status > 299 {
		return sitemapDoc{}
	}
	base, _ := url.Parse(u)
	d := sitemapDoc{base: base, need: need, seen: map[string]bool{}}
	m.parseSitemap(ctx, &d, body)
	d.seen = nil
	if d.kind != kindNone {
		m.mu.Lock()
		m.sitemaps++
		m.mu.Unlock()
	}
	return d
}

// parseSitemap reads body (gzipped or not) into d, within the bounds.
func (m *mapper) parseSitemap(ctx context.Context, d *sitemapDoc, body []byte) {
	var r io.Reader = bytes.NewReader(body)
	// A body that is valid UTF-8 was transcoded already, or was UTF-8 from
	// the start: its XML declaration's encoding is not to be applied again.
	// A gzipped body is as the site wrote it.
	trustUTF8 := false
	want := m.b.MaxBodyBytes
	if len(body) >= 2 && body[0] == 0x1f && body[1] == 0x8b {
		zr, err := gzip.NewReader(r)
		if err != nil {
			d.err = err
			return
		}
		defer zr.Close()
		r = zr
	} else {
		trustUTF8 = utf8.Valid(body)
		want = min(want, int64(len(body)))
	}
	budget := m.take(want)
	lr := &limitReader{r: r, n: budget}
	defer func() { m.giveBack(lr.n) }()
	br := bufio.NewReader(lr)
	if bom, _ := br.Peek(3); bytes.Equal(bom, []byte("\xef\xbb\xbf")) {
		br.Discard(3)
	}
	head, _ := br.Peek(512)
	head = bytes.TrimLeft(head, " \t\r\n")
	if len(head) > 0 && head[0] == '<' {
		m.parseXML(ctx, d, br, trustUTF8)
	} else {
		m.parseText(d, br)
	}
	if d.kind == kindNone {
		d.locs = nil
	}
	d.cut = d.cut || lr.hit
}

// parseXML streams a sitemap, index or feed, keeping the URLs of <loc>
// (in <url> or <sitemap>), RSS <item><link> and Atom <entry><link href>.
// RawToken: names are matched by their local part, and an unbalanced
// document is read as far as it goes.
func (m *mapper) parseXML(ctx context.Context, d *sitemapDoc, r io.Reader, trustUTF8 bool) {
	dec := xml.NewDecoder(r)
	dec.Strict = false
	dec.CharsetReader = func(label string, in io.Reader) (io.Reader, error) {
		if trustUTF8 {
			return in, nil
		}
		return charset.NewReaderLabel(label, in)
	}
	var stack []string // local names, lower case
	var text strings.Builder
	inText := false
	for n := 0; ; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			d.err = ctx.Err()
			return
		}
		tok, err := dec.RawToken()
		if err != nil {
			if err != io.EOF {
				d.err = err
			}
			break
		}
		switch t := tok.(type) {
		case xml.StartElement:
			name := strings.ToLower(t.Name.Local)
			if len(stack) == 0 {
				switch name {
				case "urlset", "rss", "feed", "rdf":
					d.kind = kindURLs
				case "sitemapindex":
					d.kind = kindIndex
				default:
					d.err = errNotSitemap
					return
				}
			}
			parent := ""
			if len(stack) > 0 {
				parent = stack[len(stack)-1]
			}
			stack = append(stack, name)
			switch {
			case name == "loc" && (parent == "url" || parent == "sitemap"),
				name == "link" && parent == "item":
				inText = true
				text.Reset()
			case name == "link" && parent == "entry":
				rel, href := "", ""
				for _, a := range t.Attr {
					switch strings.ToLower(a.Name.Local) {
					case "rel":
						rel = a.Value
					case "href":
						href = a.Value
					}
				}
				if href != "" && (rel == "" || rel == "alternate") && !m.emit(d, href) {
					return
				}
			}
		case xml.CharData:
			if inText && text.Len() < 8192 {
				text.Write(t)
			}
		case xml.EndElement:
			if len(stack) > 1 { // a stray end tag does not end the root
				stack = stack[:len(stack)-1]
			}
			if inText {
				inText = false
				if s := strings.TrimSpace(text.String()); s != "" && !m.emit(d, s) {
					return
				}
			}
		}
	}
}

// parseText reads a text sitemap: one absolute URL a line; other lines are
// ignored, and a document without one is not a sitemap.
func (m *mapper) parseText(d *sitemapDoc, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if resolve(nil, line) == nil {
			continue
		}
		d.kind = kindURLs
		if !m.emit(d, line) {
			return
		}
	}
	d.err = sc.Err()
	if d.kind == kindNone {
		d.err = errNotSitemap
	}
}

// emit takes one entry of d; false when no more are to be read: the
// document's bound is reached (d.cut), or it has all the page URLs that
// can be used.
func (m *mapper) emit(d *sitemapDoc, loc string) bool {
	if d.entries >= m.b.MaxSitemapURLs {
		d.cut = true
		return false
	}
	d.entries++
	if d.kind == kindIndex {
		d.locs = append(d.locs, loc)
		return true
	}
	if u, ok := m.norm(d.base, loc); ok && !d.seen[u] {
		d.seen[u] = true
		d.locs = append(d.locs, u)
	}
	d.full = len(d.locs) >= d.need
	return !d.full
}

// limitReader reads at most n bytes and notes when the source had more.
type limitReader struct {
	r   io.Reader
	n   int64
	hit bool
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		// One byte more tells a body of exactly the limit from a longer one.
		var b [1]byte
		if k, _ := l.r.Read(b[:]); k > 0 {
			l.hit = true
		}
		return 0, io.EOF
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	k, err := l.r.Read(p)
	l.n -= int64(k)
	return k, err
}
