// A recipe module for the tests: what it does is its input "mode".
package main

import (
	"os"
	"strings"

	"github.com/trawlhq/trawl/cell/recipe/guest"
)

func main() {
	in, err := guest.Inputs()
	if err != nil {
		os.Exit(3)
	}
	url, _ := in["url"].(string)
	switch in["mode"] {
	case "links":
		p, err := guest.Fetch(url)
		if err != nil {
			guest.Log("fetch: %v", err)
			return
		}
		els, err := guest.Select(p.ID, "a[href]")
		if err != nil {
			os.Exit(4)
		}
		guest.Log("%d links on %s", len(els), p.URL)
		for _, e := range els {
			guest.Emit(map[string]any{"text": e.Text, "href": e.Attrs["href"], "ignored": true})
		}
	case "spin":
		n := 0
		for {
			n++
		}
	case "grow":
		var keep [][]byte
		for {
			keep = append(keep, make([]byte, 1<<20))
			if len(keep) < 0 {
				break
			}
		}
	case "wander":
		_, err := guest.Fetch(strings.Replace(url, "127.0.0.1", "localhost", 1))
		guest.Log("wander: %v", err)
		guest.Emit(map[string]any{"text": "after"})
	case "crash":
		var m map[string]int
		m["x"] = 1
	}
}
