package fetch_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/trawlhq/trawl/cell/fetch"
	"github.com/trawlhq/trawl/internal/urlpolicy"
)

func ExampleHTTP_Fetch_refused() {
	for _, raw := range []string{
		"HTTP://Example.COM:80/docs?page=2",
		"http://bücher.example/",
		"http://0x7f000001/admin",
		"http://[::ffff:169.254.169.254]/latest/meta-data/",
		"file:///etc/passwd",
		"http://user:pass@example.com/",
	} {
		u, err := urlpolicy.Validate(raw, false)
		switch {
		case errors.Is(err, fetch.ErrNotPublic):
			fmt.Println("not public:", raw)
		case err != nil:
			fmt.Println("refused:", err)
		default:
			fmt.Println("ok:", u)
		}
	}
	// Output:
	// ok: http://example.com/docs?page=2
	// ok: http://xn--bcher-kva.example/
	// not public: http://0x7f000001/admin
	// not public: http://[::ffff:169.254.169.254]/latest/meta-data/
	// refused: url must start with http:// or https://
	// refused: url is not valid: credentials in url
}

func ExampleHTTP_Fetch() {
	// A local site stands in for the web; reaching it needs private
	// networks allowed, which a production engine never does.
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/old" {
			http.Redirect(w, r, "/new", http.StatusMovedPermanently)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=iso-8859-1")
		w.Write([]byte("<p>Caf\xe9</p>"))
	}))
	defer site.Close()

	engine := fetch.NewHTTP(fetch.HTTPConfig{AllowPrivateNetworks: true})
	defer engine.Close()

	resp, err := engine.Fetch(context.Background(), &fetch.Request{URL: site.URL + "/old"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Status, resp.Redirects, resp.ContentType, resp.Charset)
	fmt.Println(string(resp.Body))
	// Output:
	// 200 1 text/html windows-1252
	// <p>Café</p>
}
