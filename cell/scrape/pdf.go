package scrape

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/trawlhq/trawl/cell/content"
	"github.com/trawlhq/trawl/cell/content/pdftext"
	"github.com/trawlhq/trawl/internal/httpjson"
)

// PDFType is the content type a PDF's result reports, whatever the site
// declared.
const PDFType = "application/pdf"

// pdfResult fills res from a PDF: its text as Markdown and HTML (as
// opts.Format asks), its title and page count. With opts.PDF.Skip nothing
// is converted: the result has the PDF's facts only, and its bytes are
// the fetched page's body.
func (s *Service) pdfResult(ctx context.Context, res *Result, body []byte, opts Options) (*Result, *content.Document, error) {
	res.ContentType = PDFType
	if opts.PDF.Skip {
		res.ContentHash = content.Hash(string(body))
		return res, nil, nil
	}
	doc, err := s.pdf.Convert(ctx, body, pdftext.Options{MaxPages: opts.PDF.MaxPages})
	if err != nil {
		return nil, nil, pdfError(err)
	}
	md := doc.Markdown(opts.PDF.PageMarkers)
	res.Title, res.Pages, res.ContentHash = doc.Title, doc.NumPages, content.Hash(md)
	if opts.Parse != (ParseField{}) {
		res.Parsed = &content.Parsed{} // a PDF's links are not read
	}
	if opts.Format != FormatHTML {
		res.Markdown = &md
	}
	if opts.Format != FormatMarkdown {
		h := doc.HTML()
		res.HTML = &h
	}
	return res, nil, nil
}

// pdfError is the answer to a PDF the converter did not convert.
func pdfError(err error) error {
	switch {
	case errors.Is(err, context.Canceled):
		return err
	case errors.Is(err, pdftext.ErrBusy):
		return &httpjson.HTTPError{Status: http.StatusServiceUnavailable, Code: "pdf_busy",
			Message: "every PDF conversion of this cell is busy; nothing was charged, repeat the request in a few seconds", Err: err, Private: true,
			RetryAfter: 5 * time.Second}
	}
	return &httpjson.HTTPError{Status: http.StatusUnprocessableEntity, Code: "unsupported_content",
		Message: "the PDF could not be converted to text; nothing was charged", Err: err}
}
