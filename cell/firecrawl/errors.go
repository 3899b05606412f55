package firecrawl

import "github.com/trawlhq/trawl/internal/fcapi"

// The error envelope and its refusals are Firecrawl's wire contract, which
// the gate writes too: internal/fcapi. They are named here as well so the
// cell's Firecrawl code reads as one package.

type (
	// Envelope is Firecrawl's error answer.
	Envelope = fcapi.Envelope
	// Error is a refusal in Firecrawl's terms.
	Error = fcapi.Error
)

// Error codes of the envelope.
const (
	CodeBadRequest     = fcapi.CodeBadRequest
	CodeUnsupported    = fcapi.CodeUnsupported
	CodeScrapeTimeout  = fcapi.CodeScrapeTimeout
	CodeScrapeFailed   = fcapi.CodeScrapeFailed
	CodeScrapeAction   = fcapi.CodeScrapeAction
	CodeUnsupportedURL = fcapi.CodeUnsupportedURL
	CodeNotFound       = fcapi.CodeNotFound
	CodeInternal       = fcapi.CodeInternal
)

var (
	// BadRequest is a 400 for a field of the request.
	BadRequest = fcapi.BadRequest
	// Unsupported is a 400 for a feature trawl does not honour.
	Unsupported = fcapi.Unsupported
	// WriteError answers an error in the envelope.
	WriteError = fcapi.WriteError
)

// CodeFor is the Firecrawl code of an error kept as its status and code
// (a job's failed URL): a Firecrawl code as it is, a trawl one as
// WriteError would answer it.
func CodeFor(status int, code string) string {
	switch code {
	case CodeBadRequest, CodeUnsupported, CodeScrapeTimeout, CodeScrapeFailed, CodeScrapeAction, CodeUnsupportedURL, CodeNotFound, CodeInternal:
		return code
	}
	return fcapi.CodeFor(status)
}
