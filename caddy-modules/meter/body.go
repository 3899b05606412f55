package meter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
)

// memBody is how much of a request body the meter keeps in memory; the
// rest of a body (up to its route's limit) waits in a temporary file until
// the proxy has sent it. A gate answering many large job submissions at
// once holds at most this much of each.
const memBody = 256 << 10

// errTooLarge is a body over its route's limit.
type errTooLarge struct{ limit int64 }

func (e errTooLarge) Error() string {
	if e.limit == 0 {
		return "this route takes no request body"
	}
	return fmt.Sprintf("request body is larger than %d bytes", e.limit)
}

// spool is a request body read up to its route's limit: the first memBody
// bytes in memory, the rest in a temporary file. It is the body the proxy
// forwards; Close removes the file.
type spool struct {
	mem  []byte
	file *os.File
	r    io.Reader
}

// readBody reads r's body, refusing one over limit before reading it when
// its length is declared and as soon as it passes limit otherwise. Nothing
// over limit is kept.
func readBody(r *http.Request, limit int64) (*spool, error) {
	if r.ContentLength > limit {
		return nil, errTooLarge{limit}
	}
	src := io.LimitReader(r.Body, limit+1)
	s := &spool{}
	var buf bytes.Buffer
	n, err := io.CopyN(&buf, src, min(memBody, limit+1))
	s.mem = buf.Bytes()
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	total := n
	if err == nil { // more may follow: into the file
		f, ferr := os.CreateTemp("", "trawl-meter-body-*")
		if ferr != nil {
			return nil, ferr
		}
		os.Remove(f.Name()) // unlinked: the open file is all that remains
		s.file = f
		m, cerr := io.Copy(f, src)
		total += m
		if cerr != nil {
			s.Close()
			return nil, cerr
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			s.Close()
			return nil, err
		}
	}
	if total > limit {
		s.Close()
		return nil, errTooLarge{limit}
	}
	s.rewind()
	return s, nil
}

func (s *spool) rewind() {
	if s.file != nil {
		s.file.Seek(0, io.SeekStart)
		s.r = io.MultiReader(bytes.NewReader(s.mem), s.file)
		return
	}
	s.r = bytes.NewReader(s.mem)
}

func (s *spool) size() int64 {
	n := int64(len(s.mem))
	if s.file != nil {
		if st, err := s.file.Stat(); err == nil {
			n += st.Size()
		}
	}
	return n
}

func (s *spool) Read(p []byte) (int, error) { return s.r.Read(p) }

// Close removes the temporary file, if any.
func (s *spool) Close() error {
	if s.file != nil {
		s.file.Close()
		s.file = nil
	}
	return nil
}

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
