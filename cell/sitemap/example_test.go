package sitemap_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/trawlhq/trawl/cell/sitemap"
)

func ExampleMap() {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	mux.HandleFunc("/robots.txt", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "User-agent: *\nSitemap: %s/sitemap.xml\n", srv.URL)
	})
	mux.HandleFunc("/sitemap.xml", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<urlset><url><loc>%[1]s/pricing</loc></url><url><loc>%[1]s/blog/launch</loc></url></urlset>`, srv.URL)
	})
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<title>Home</title><a href="/blog">Our blog</a> <a href="https://elsewhere.example/">x</a>`)
	})

	// In the cell, the Fetcher is the SSRF-guarded fetch engine.
	fetch := func(ctx context.Context, u string) (int, string, []byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return 0, "", nil, err
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", nil, err
		}
		defer res.Body.Close()
		body, err := io.ReadAll(io.LimitReader(res.Body, sitemap.DefaultMaxBodyBytes))
		return res.StatusCode, res.Header.Get("Content-Type"), body, err
	}

	for _, search := range []string{"", "blog"} {
		req := sitemap.NewRequest(srv.URL)
		req.Search = search
		res, err := sitemap.Map(context.Background(), fetch, req)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("search %q:\n", search)
		for _, l := range res.Links {
			fmt.Printf("  %s %q\n", strings.TrimPrefix(l.URL, srv.URL), l.Title)
		}
	}
	// Output:
	// search "":
	//    "Home"
	//   /pricing ""
	//   /blog/launch ""
	//   /blog "Our blog"
	// search "blog":
	//   /blog "Our blog"
	//   /blog/launch ""
	//    "Home"
	//   /pricing ""
}
