package recipe

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/andybalholm/cascadia"

	"github.com/trawlhq/trawl/internal/recipespec"
)

// expand fills a URL template with the run's inputs: a template that is
// just "{name}" takes the value as it is; elsewhere values are
// query-escaped.
func expand(tmpl string, vals Values) string {
	return recipespec.Expand(tmpl, func(name string) (string, bool) {
		v, ok := vals[name]
		return valueString(v), ok
	})
}

// runJSON runs a declarative recipe: each start page, its next pages up
// to max_pages, rows by the json_css schema, joined with detail pages.
func (r *run) runJSON(ctx context.Context) error {
	b := r.rc.JSON
	maxPages := b.MaxPages
	if maxPages == 0 {
		maxPages = r.rc.PageBudget
	}
	var next cascadia.Selector
	if b.Next != "" {
		next, _ = compileSel(b.Next)
	}
	seen := map[string]bool{}
	for _, tmpl := range b.URLs {
		pageURL := expand(tmpl, r.vals)
		for list := 0; pageURL != "" && !seen[pageURL]; list++ {
			if list >= maxPages {
				r.warn(fmt.Sprintf("stopped after max_pages (%d) list pages; more follow", maxPages))
				break
			}
			seen[pageURL] = true
			id, p, status, err := r.fetch(ctx, pageURL)
			if err != nil {
				return err
			}
			if status >= 400 {
				return r.setFatal(fetchFailed("%s answered HTTP %d", p.url, status))
			}
			r.mu.Lock()
			doc := r.nodes[id]
			r.mu.Unlock()
			items, err := r.rc.Rows.Items(ctx, doc)
			if err != nil {
				return err
			}
			base, _ := url.Parse(p.url)
			objs := make([]map[string]any, 0, len(items))
			for _, it := range items {
				var o map[string]any
				if err := json.Unmarshal(it, &o); err != nil {
					return err
				}
				resolveURLs(o, b.URLFields, base)
				objs = append(objs, o)
			}
			if b.Detail != nil {
				for _, o := range objs {
					if err := r.join(ctx, o, base); err != nil {
						return err
					}
				}
			}
			if err := r.addRows(objs); err != nil {
				return err
			}
			pageURL = ""
			if next != nil {
				if n := cascadia.Query(doc, next); n != nil {
					for _, a := range n.Attr {
						if a.Key == "href" {
							if u, err := base.Parse(strings.TrimSpace(a.Val)); err == nil {
								u.Fragment = ""
								pageURL = u.String()
							}
						}
					}
				}
			}
		}
	}
	return nil
}

// join reads the row's detail page into it.
func (r *run) join(ctx context.Context, o map[string]any, base *url.URL) error {
	link, _ := o[r.rc.JSON.Detail.Link].(string)
	if strings.TrimSpace(link) == "" {
		r.warn("unmatched join: a row has no " + r.rc.JSON.Detail.Link)
		return nil
	}
	u, err := base.Parse(strings.TrimSpace(link))
	if err != nil {
		r.warn("unmatched join: " + link + " is not a URL")
		return nil
	}
	id, p, status, err := r.fetch(ctx, u.String())
	if err != nil {
		return err
	}
	if status >= 400 {
		r.warn(fmt.Sprintf("unmatched join: %s answered HTTP %d", p.url, status))
		return nil
	}
	r.mu.Lock()
	doc := r.nodes[id]
	r.mu.Unlock()
	raw, err := r.rc.Detail.Object(doc)
	if err != nil {
		return err
	}
	var d map[string]any
	if err := json.Unmarshal(raw, &d); err != nil {
		return err
	}
	if len(d) == 0 {
		r.warn("unmatched join: nothing found on " + p.url)
	}
	db, _ := url.Parse(p.url)
	resolveURLs(d, r.rc.JSON.URLFields, db)
	for k, v := range d {
		o[k] = v
	}
	return nil
}

func resolveURLs(o map[string]any, fields []string, base *url.URL) {
	if base == nil {
		return
	}
	for _, f := range fields {
		s, ok := o[f].(string)
		if !ok || strings.TrimSpace(s) == "" {
			continue
		}
		if u, err := base.Parse(strings.TrimSpace(s)); err == nil {
			o[f] = u.String()
		}
	}
}
