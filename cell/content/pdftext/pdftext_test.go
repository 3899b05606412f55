package pdftext

import (
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// kettles.pdf is testdata/kettles.html printed by Chromium (two A5 pages,
// subset fonts with ToUnicode maps, an "fi" ligature, a title).
func kettles(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/kettles.pdf")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestConvertKettles(t *testing.T) {
	data := kettles(t)
	if !Looks(data) || Looks([]byte("<!doctype html>")) {
		t.Fatal("Looks does not tell a PDF from HTML")
	}
	doc, err := New(Config{}).Convert(context.Background(), data, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if doc.Title != "Kettle Report" || doc.NumPages != 2 || len(doc.Pages) != 2 {
		t.Fatalf("title %q, %d pages, read %d", doc.Title, doc.NumPages, len(doc.Pages))
	}
	want := []string{
		"Kettle test report\nThe copper kettle boiled one litre in four minutes.\nThe enamel kettle took five minutes.",
		"Second page\nThe glass kettle took six and a half minutes.\nTea brewed at 95 °C tastes best.",
	}
	for i, w := range want {
		if doc.Pages[i] != w {
			t.Errorf("page %d:\n%q\nwant\n%q", i+1, doc.Pages[i], w)
		}
	}
	if md := doc.Markdown(false); md != want[0]+"\n\n"+want[1] {
		t.Errorf("markdown:\n%s", md)
	}
	if md := doc.Markdown(true); md != want[0]+"\n\n---\n\n<!-- page 2 -->\n\n"+want[1] {
		t.Errorf("markdown with page markers:\n%s", md)
	}
	h := doc.HTML()
	if !strings.HasPrefix(h, `<section data-page="1"><p>Kettle test report<br>`) || !strings.Contains(h, `<section data-page="2">`) {
		t.Errorf("html: %s", h)
	}

	// maxPages: the first page only, the count still the PDF's.
	doc, err = New(Config{}).Convert(context.Background(), data, Options{MaxPages: 1})
	if err != nil || len(doc.Pages) != 1 || doc.NumPages != 2 {
		t.Fatalf("MaxPages 1: %+v, %v", doc, err)
	}
}

func TestConvertRefuses(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		cfg  Config
		want error
	}{
		{"not a PDF", []byte("%PDF-1.7\nthis is not a PDF at all"), Config{}, ErrUnreadable},
		{"truncated", kettles(t)[:4000], Config{}, ErrUnreadable},
		// 4 MiB of text operators in 4 KiB of deflate: refused after 1 MiB.
		{"decompression bomb", bombPDF(t, 4<<20), Config{MaxPageContent: 1 << 20}, ErrTooLarge},
		{"too much text", kettles(t), Config{MaxText: 40}, ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg).Convert(context.Background(), tt.data, Options{})
			if !errors.Is(err, tt.want) {
				t.Errorf("err %v, want %v", err, tt.want)
			}
		})
	}
	// Within the bound the same kind of page converts.
	doc, err := New(Config{}).Convert(context.Background(), bombPDF(t, 64<<10), Options{})
	if err != nil || len(doc.Pages) != 1 || !strings.HasPrefix(doc.Pages[0], "tea tea tea") {
		t.Errorf("a page within the bound: %v", err)
	}
}

// A conversion that never finishes: Convert answers at its deadline, the
// slot stays taken until the reading ends, and the next PDF fails with
// ErrBusy at its own deadline rather than queueing forever.
func TestConvertDeadlineAndSlots(t *testing.T) {
	c := New(Config{Timeout: 100 * time.Millisecond, Concurrency: 1})
	stuck := make(chan struct{})
	c.read = func(context.Context, []byte, Options) (*Document, error) {
		<-stuck // a page the library never finishes
		return &Document{Pages: []string{"done"}}, nil
	}
	if _, err := c.Convert(context.Background(), nil, Options{}); !errors.Is(err, ErrTimeout) {
		t.Fatalf("a conversion past its deadline: %v", err)
	}
	if _, err := c.Convert(context.Background(), nil, Options{}); !errors.Is(err, ErrBusy) {
		t.Fatalf("with the only slot held: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Convert(ctx, nil, Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("a caller gone: %v", err)
	}
	close(stuck)                     // the reading ends: its slot comes free
	c.cfg.Timeout = 10 * time.Second // (only this goroutine reads cfg: the stalled read does not)
	if doc, err := c.Convert(context.Background(), nil, Options{}); err != nil || len(doc.Pages) != 1 {
		t.Fatalf("after the stuck conversion ended: %v", err)
	}
}

// bombPDF is a one-page PDF whose content stream is n bytes of text
// operators, deflated.
func bombPDF(t *testing.T, n int) []byte {
	t.Helper()
	op := []byte("(tea tea tea tea tea tea tea tea tea tea tea tea tea tea tea tea) Tj T*\n")
	var raw bytes.Buffer
	raw.WriteString("BT /F1 12 Tf 72 720 Td 14 TL\n")
	for raw.Len() < n {
		raw.Write(op)
	}
	raw.WriteString("ET\n")
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(raw.Bytes())
	zw.Close()
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>",
		fmt.Sprintf("<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream", z.Len(), z.Bytes()),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
	}
	var out bytes.Buffer
	out.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = out.Len()
		fmt.Fprintf(&out, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := out.Len()
	fmt.Fprintf(&out, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&out, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&out, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return out.Bytes()
}
