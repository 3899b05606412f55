package meter

import (
	"encoding/json"
	"io"
)

// countBody reads the body's top-level url and the number of elements of
// its urls with a streaming decoder: no URL is kept, so counting a 10,000-URL
// job costs no more than a few tokens of memory. A body that does not parse
// leaves url "" and n 0 (the cell refuses it with its own 400).
func countBody(r io.Reader) (url string, n int) {
	d := json.NewDecoder(r)
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return "", 0
	}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return url, n
		}
		key, _ := t.(string)
		switch key {
		case "url":
			var s string
			if d.Decode(&s) != nil {
				return url, n
			}
			url = s
		case "urls":
			t, err := d.Token()
			if err != nil || t != json.Delim('[') {
				return url, n
			}
			for d.More() {
				if skip(d) != nil {
					return url, n
				}
				n++
			}
			if _, err := d.Token(); err != nil {
				return url, n
			}
		default:
			if skip(d) != nil {
				return url, n
			}
		}
	}
	return url, n
}

// skip reads one value of d token by token.
func skip(d *json.Decoder) error {
	depth := 0
	for {
		t, err := d.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}
