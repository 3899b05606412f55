package extract

import (
	"context"
	"fmt"
	"strings"

	"golang.org/x/net/html"

	"github.com/trawlhq/trawl/internal/cssschema"
)

// jsonCSSStrategy applies a json_css schema (internal/cssschema).
type jsonCSSStrategy struct{ schema *cssschema.Schema }

func (jsonCSSStrategy) Name() string { return "json_css" }

func newJSONCSS(p params) (Strategy, error) {
	if !p.has("schema") {
		return nil, badParams(p.field("schema"), "is required")
	}
	raw, _, err := p.object("schema")
	if err != nil {
		return nil, err
	}
	s, err := cssschema.Compile(raw, p.field("schema")+".", "") // errors are *ParamError
	if err != nil {
		return nil, err
	}
	return jsonCSSStrategy{schema: s}, nil
}

func (s jsonCSSStrategy) Extract(ctx context.Context, p Page) (string, error) {
	doc, err := html.Parse(strings.NewReader(p.HTML))
	if err != nil {
		return "", fmt.Errorf("parse html: %w", err)
	}
	out, err := s.schema.Extract(ctx, doc)
	if err != nil {
		return "", err
	}
	return string(out), nil
}

var _ Strategy = jsonCSSStrategy{}
