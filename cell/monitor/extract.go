package monitor

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/trawlhq/trawl/cell/monitor/diff"
)

// ruleExtractor fills a schema without a model until the extract
// service's extractor is wired in (Config.Extractor): each top-level
// field takes the value of the page's `label: value` line whose label is
// the field's name (case, spaces and underscores aside), coerced to the
// field's type; any other field is null.
//
// The schema is a JSON Schema object ({"type":"object","properties":
// {...}}) or an example object ({"price": "number"}).
type ruleExtractor struct{}

func (ruleExtractor) Extract(_ context.Context, md string, schema json.RawMessage) (json.RawMessage, error) {
	var sch map[string]json.RawMessage
	if err := json.Unmarshal(schema, &sch); err != nil {
		return nil, err
	}
	fields := map[string]string{} // name → type
	if props, ok := sch["properties"]; ok {
		var p map[string]struct {
			Type any `json:"type"`
		}
		if err := json.Unmarshal(props, &p); err != nil {
			return nil, err
		}
		for k, v := range p {
			t, _ := v.Type.(string)
			fields[k] = t
		}
	} else {
		for k, v := range sch {
			var t string
			if json.Unmarshal(v, &t) != nil {
				t = ""
			}
			fields[k] = t
		}
	}
	labels := map[string]string{}
	for l, v := range diff.Parse(md).Labels() {
		labels[fold(l)] = v
	}
	out := map[string]any{}
	for name, typ := range fields {
		v, ok := labels[fold(name)]
		if !ok {
			out[name] = nil
			continue
		}
		out[name] = coerce(v, typ)
	}
	return json.Marshal(out)
}

func fold(s string) string {
	return strings.NewReplacer(" ", "", "_", "", "-", "").Replace(strings.ToLower(strings.TrimSpace(s)))
}

func coerce(v, typ string) any {
	switch typ {
	case "number", "integer":
		var num strings.Builder
		for _, r := range v {
			if r >= '0' && r <= '9' || r == '.' || r == '-' && num.Len() == 0 {
				num.WriteRune(r)
			} else if num.Len() > 0 && r != ',' {
				break
			}
		}
		if f, err := strconv.ParseFloat(num.String(), 64); err == nil {
			if typ == "integer" {
				return int64(f)
			}
			return f
		}
		return nil
	case "boolean":
		switch strings.ToLower(v) {
		case "yes", "true", "on", "available", "in stock":
			return true
		case "no", "false", "off", "unavailable", "out of stock":
			return false
		}
		return nil
	}
	return v
}
