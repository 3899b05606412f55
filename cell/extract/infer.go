package extract

import (
	"encoding/json"
	"regexp"
	"strings"
)

// SchemaFromInstruction reads the fields an instruction names: "the
// product name, its price and whether it is in stock" is an object with
// name, price (number) and in_stock (boolean). It knows English lists
// of noun phrases ("X, Y and Z", "X; Y", "X as well as Y"), "whether/if
// it is X" as a boolean, and types from the names (price, count, rating
// as numbers; dates; "all/list of/every X" as an array). It returns nil
// when it finds no field.
func SchemaFromInstruction(instruction string) json.RawMessage {
	s := strings.ToLower(instruction)
	s = reLead.ReplaceAllString(s, "")
	s = strings.NewReplacer(" as well as ", ",", " along with ", ",", " together with ", ",", " plus ", ",", "\n", ",", ";", ",", ".", ",").Replace(s)
	s = reAnd.ReplaceAllString(s, ",")
	type field struct{ name, typ, fmt string }
	var fields []field
	seen := map[string]bool{}
	var subject string
	for pi, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		typ := ""
		if m := reWhether.FindStringSubmatch(part); m != nil {
			part, typ = m[1], "boolean"
		}
		array := false
		if m := reAll.FindStringSubmatch(part); m != nil {
			part, array = m[1], true
		}
		ws := strings.Fields(part)
		var kept []string
		for _, w := range ws {
			w = strings.Trim(w, `"'()[]:`)
			inner := (len(kept) > 0 && (w == "of" || w == "per")) || (typ == "boolean" && w == "in")
			if w == "" || (fillers[w] && !inner) {
				continue
			}
			kept = append(kept, w)
		}
		for len(kept) > 0 && (kept[len(kept)-1] == "of" || kept[len(kept)-1] == "per") {
			kept = kept[:len(kept)-1]
		}
		if len(kept) == 0 {
			continue
		}
		// "the product name": the product is the subject, the field is
		// its name; later parts name fields of the same subject.
		if len(kept) >= 2 && knownField(kept[len(kept)-1]) && typ == "" {
			if subject == "" && pi == 0 {
				subject = strings.Join(kept[:len(kept)-1], " ")
			}
			if strings.Join(kept[:len(kept)-1], " ") == subject {
				kept = kept[len(kept)-1:]
			}
		}
		if len(kept) > 4 {
			kept = kept[len(kept)-4:]
		}
		name := reNotName.ReplaceAllString(strings.Join(kept, "_"), "")
		if strings.Trim(name, "_0123456789") == "" || seen[name] {
			continue
		}
		seen[name] = true
		f := field{name: name, typ: typ}
		if f.typ == "" {
			switch kindOf(name) {
			case "price":
				f.typ = "number"
			case "bool":
				f.typ = "boolean"
			case "date":
				f.typ, f.fmt = "string", ""
			default:
				f.typ = "string"
				last := kept[len(kept)-1]
				if numberWords[last] || strings.HasPrefix(name, "number_of") {
					f.typ = "number"
				}
			}
		}
		if array {
			f.typ = "array:" + f.typ
		}
		fields = append(fields, f)
	}
	if len(fields) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	for i, f := range fields {
		if i > 0 {
			b.WriteByte(',')
		}
		nb, _ := json.Marshal(f.name)
		b.Write(nb)
		if t, ok := strings.CutPrefix(f.typ, "array:"); ok {
			b.WriteString(`:{"type":"array","items":{"type":"` + t + `"}}`)
		} else {
			b.WriteString(`:{"type":["` + f.typ + `","null"]}`)
		}
	}
	b.WriteString(`}}`)
	return json.RawMessage(b.String())
}

var (
	reNotName = regexp.MustCompile(`[^\p{L}\p{N}_]+`)
	reLead    = regexp.MustCompile(`^\s*(?:please\s+)?(?:extract|get|find|give me|return|list|pull|read|scrape|collect|fetch|tell me)(?:\s+me)?\s*(?:out\s+)?[:\-]?\s*`)
	reAnd     = regexp.MustCompile(`\s+(?:and|&)\s+`)
	reWhether = regexp.MustCompile(`^(?:whether|if)\s+(?:it|they|the \w+|this \w+)\s+(?:is|are|has|have|was|can)\s+(?:an?\s+|the\s+)?(.+)$`)
	reAll     = regexp.MustCompile(`^(?:all|every|each|the list of|a list of|list of)\s+(?:of\s+)?(?:the\s+|its\s+|their\s+)?(.+?s)$`)
)

var fillers = map[string]bool{
	"the": true, "a": true, "an": true, "its": true, "their": true, "his": true, "her": true, "of": true,
	"this": true, "that": true, "page's": true, "page": false, "it": true, "they": true, "any": true, "also": true, "then": true,
	"product's": true, "article's": true, "item's": true, "on": true, "from": true, "in": true, "for": true,
}

// knownField is a word that names a field of something ("name", "price").
func knownField(w string) bool {
	switch w {
	case "name", "title", "price", "description", "author", "date", "url", "image", "rating", "brand", "sku",
		"currency", "email", "phone", "address", "headline", "summary", "category", "color", "colour", "size", "weight":
		return true
	}
	return false
}

var numberWords = map[string]bool{"count": true, "number": true, "rating": true, "score": true, "quantity": true, "total": true, "age": true, "year": true, "weight": true, "height": true, "width": true, "length": true, "stars": true, "reviews": true}

// SchemaFromExample infers a schema from an example of the structure:
// an object's keys and an array's first item, with the JSON types of
// their values (a null value leaves the type open).
func SchemaFromExample(example json.RawMessage) (json.RawMessage, error) {
	keys, vals, err := orderedObject(example)
	if err != nil {
		// Not an object: an array or a scalar.
		var v any
		if err := json.Unmarshal(example, &v); err != nil {
			return nil, err
		}
		return exampleNode(example)
	}
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		sub, err := exampleNode(vals[i])
		if err != nil {
			return nil, err
		}
		b.Write(sub)
	}
	b.WriteString(`}}`)
	return json.RawMessage(b.String()), nil
}

func exampleNode(v json.RawMessage) (json.RawMessage, error) {
	t := strings.TrimSpace(string(v))
	if t == "" {
		return json.RawMessage(`{}`), nil
	}
	switch t[0] {
	case '{':
		return SchemaFromExample(v)
	case '[':
		var list []json.RawMessage
		if err := json.Unmarshal(v, &list); err != nil {
			return nil, err
		}
		items := json.RawMessage(`{}`)
		if len(list) > 0 {
			var err error
			if items, err = exampleNode(list[0]); err != nil {
				return nil, err
			}
		}
		return json.RawMessage(`{"type":"array","items":` + string(items) + `}`), nil
	case '"':
		return json.RawMessage(`{"type":["string","null"]}`), nil
	case 't', 'f':
		return json.RawMessage(`{"type":["boolean","null"]}`), nil
	case 'n':
		return json.RawMessage(`{}`), nil
	}
	if strings.ContainsAny(t, ".eE") {
		return json.RawMessage(`{"type":["number","null"]}`), nil
	}
	return json.RawMessage(`{"type":["number","null"]}`), nil
}
