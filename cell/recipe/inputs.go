package recipe

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"github.com/trawlhq/trawl/internal/recipespec"
)

// Values are a run's checked inputs by name: string, int64, bool, or a
// date as "YYYY-MM-DD".
type Values map[string]any

// MaxSessionBytes bounds a session input (one Cookie header line).
const MaxSessionBytes = 8 << 10

// Check checks a request body against the recipe's inputs: unknown
// names, wrong types and missing required inputs are bad_input; a
// missing input takes its default. bypass is the body's bypass_cache.
func (r *Recipe) Check(body map[string]json.RawMessage) (vals Values, bypass bool, err error) {
	vals = Values{}
	for k, raw := range body {
		if k == "bypass_cache" {
			if err := json.Unmarshal(raw, &bypass); err != nil || isNull(raw) {
				return nil, false, badInput("bypass_cache must be true or false")
			}
			continue
		}
		in, ok := r.Input(k)
		if !ok {
			return nil, false, badInput(fmt.Sprintf("%s has no input %q (inputs: %s)", r.Name, k, r.inputNames()))
		}
		if isNull(raw) {
			continue // as if missing
		}
		v, err := recipespec.Coerce(in, raw)
		if err != nil {
			msg := fmt.Sprintf("input %s: %v", k, err)
			if in.Secret {
				msg = fmt.Sprintf("input %s: must be a %s", k, in.Type)
			}
			return nil, false, badInput(msg)
		}
		vals[k] = v
	}
	for _, in := range r.Inputs {
		if _, ok := vals[in.Name]; ok {
			continue
		}
		if len(in.Default) > 0 {
			v, _ := recipespec.Coerce(&in, in.Default) // checked by Parse
			vals[in.Name] = v
			continue
		}
		if in.Required {
			return nil, false, badInput(fmt.Sprintf("input %s (%s) is required", in.Name, in.Type))
		}
	}
	if s, ok := vals[recipespec.SessionInput].(string); ok && len(s) > MaxSessionBytes {
		return nil, false, badInput(fmt.Sprintf("input session: at most %d bytes", MaxSessionBytes))
	}
	return vals, bypass, nil
}

func (r *Recipe) inputNames() string {
	if len(r.Inputs) == 0 {
		return "none"
	}
	var b bytes.Buffer
	for i, in := range r.Inputs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(in.Name)
	}
	return b.String()
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// String is a value as a URL template or a script sees it.
func valueString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case bool:
		return strconv.FormatBool(x)
	}
	return fmt.Sprint(v)
}

// cacheKey identifies a result: the recipe, its version and hash, and
// the inputs (sorted). Only recipes without secret inputs are cached, so
// no secret is ever part of it.
func (r *Recipe) cacheKey(vals Values) string {
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00%s\x00", r.Name, r.Version, r.Hash)
	for _, k := range keys {
		b, _ := json.Marshal(vals[k])
		fmt.Fprintf(h, "%s=%s\x00", k, b)
	}
	return hex.EncodeToString(h.Sum(nil))
}
