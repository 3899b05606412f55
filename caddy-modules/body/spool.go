package body

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
)

// memBody is how much of a request body a spool keeps in memory; the rest
// of a body (up to its route's limit) waits in a temporary file until the
// proxy has sent it. A gate answering many large job submissions at once
// holds at most this much of each.
const memBody = 256 << 10

// TooLarge is a body over its route's limit.
type TooLarge struct{ Limit int64 }

func (e TooLarge) Error() string {
	if e.Limit == 0 {
		return "this route takes no request body"
	}
	return fmt.Sprintf("request body is larger than %d bytes", e.Limit)
}

// Spool is a request body read up to its route's limit: the first memBody
// bytes in memory, the rest in a temporary file. It is the body the proxy
// forwards; Close removes the file.
type Spool struct {
	mem  []byte
	file *os.File
	r    io.Reader
}

// Read reads r's body into a Spool, refusing one over limit before reading it when
// its length is declared and as soon as it passes limit otherwise. Nothing
// over limit is kept.
func Read(r *http.Request, limit int64) (*Spool, error) {
	if r.ContentLength > limit {
		return nil, TooLarge{limit}
	}
	src := io.LimitReader(r.Body, limit+1)
	s := &Spool{}
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
		return nil, TooLarge{limit}
	}
	s.Rewind()
	return s, nil
}

// Rewind starts the body again from its first byte.
func (s *Spool) Rewind() {
	if s.file != nil {
		s.file.Seek(0, io.SeekStart)
		s.r = io.MultiReader(bytes.NewReader(s.mem), s.file)
		return
	}
	s.r = bytes.NewReader(s.mem)
}

// Size is the body's length.
func (s *Spool) Size() int64 {
	n := int64(len(s.mem))
	if s.file != nil {
		if st, err := s.file.Stat(); err == nil {
			n += st.Size()
		}
	}
	return n
}

func (s *Spool) Read(p []byte) (int, error) { return s.r.Read(p) }

// Close removes the temporary file, if any.
func (s *Spool) Close() error {
	if s.file != nil {
		s.file.Close()
		s.file = nil
	}
	return nil
}
