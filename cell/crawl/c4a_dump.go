package crawl

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode"
)

// POST /config/dump {"code": "CrawlerRunConfig(stream=True, cache_mode=CacheMode.BYPASS)"}
// answers the configuration in its serialized form, as Crawl4AI's. Crawl4AI
// evaluates the Python expression (one constructor call, no nested calls);
// we parse that subset and evaluate nothing: keyword arguments whose values
// are literals (strings, numbers, True, False, None, lists, tuples,
// dictionaries) or enum members (CacheMode.BYPASS).

func (s *Server) handleConfigDump(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var in struct {
		Code *string `json:"code"`
	}
	if err := json.Unmarshal(body, &in); err != nil || in.Code == nil {
		writeError(w, http.StatusUnprocessableEntity, "bad_input", "want {\"code\": \"CrawlerRunConfig(...)\"}")
		return
	}
	out, err := dumpConfig(*in.Code)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_input", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, out)
}

type pyParser struct {
	src string
	pos int
}

func dumpConfig(code string) (map[string]any, error) {
	p := &pyParser{src: strings.TrimSpace(code)}
	name := p.ident()
	if name != "CrawlerRunConfig" && name != "BrowserConfig" {
		return nil, fmt.Errorf("only CrawlerRunConfig(...) or BrowserConfig(...) are allowed")
	}
	if !p.eat('(') {
		return nil, fmt.Errorf("expression must be a single constructor call")
	}
	params := map[string]any{}
	for !p.eat(')') {
		k := p.ident()
		if k == "" || !p.eat('=') {
			return nil, fmt.Errorf("at %d: want keyword=value arguments", p.pos)
		}
		v, err := p.value(0)
		if err != nil {
			return nil, err
		}
		params[k] = v
		if !p.eat(',') {
			if !p.eat(')') {
				return nil, fmt.Errorf("at %d: want , or )", p.pos)
			}
			break
		}
	}
	if p.skip(); p.pos != len(p.src) {
		return nil, fmt.Errorf("at %d: text after the call", p.pos)
	}
	// The parsed params go through the same allow-list as a request's.
	if _, err := parseC4A(map[string]any{"type": name, "params": params}, "code", 0); err != nil {
		return nil, err
	}
	return map[string]any{"type": name, "params": params}, nil
}

func (p *pyParser) skip() {
	for p.pos < len(p.src) && unicode.IsSpace(rune(p.src[p.pos])) {
		p.pos++
	}
}

func (p *pyParser) eat(c byte) bool {
	p.skip()
	if p.pos < len(p.src) && p.src[p.pos] == c {
		p.pos++
		return true
	}
	return false
}

func (p *pyParser) ident() string {
	p.skip()
	st := p.pos
	for p.pos < len(p.src) && (p.src[p.pos] == '_' || unicode.IsLetter(rune(p.src[p.pos])) || (p.pos > st && unicode.IsDigit(rune(p.src[p.pos])))) {
		p.pos++
	}
	return p.src[st:p.pos]
}

func (p *pyParser) value(depth int) (any, error) {
	if depth > maxConfigDepth {
		return nil, fmt.Errorf("nested too deep")
	}
	p.skip()
	if p.pos >= len(p.src) {
		return nil, fmt.Errorf("unexpected end of the expression")
	}
	switch c := p.src[p.pos]; {
	case c == '"' || c == '\'':
		return p.str(c)
	case c == '[' || c == '(':
		end := byte(']')
		if c == '(' {
			end = ')'
		}
		p.pos++
		list := []any{}
		for !p.eat(end) {
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
			if !p.eat(',') {
				if !p.eat(end) {
					return nil, fmt.Errorf("at %d: want , or %c", p.pos, end)
				}
				break
			}
		}
		return list, nil
	case c == '{':
		p.pos++
		m := map[string]any{}
		for !p.eat('}') {
			k, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			ks, ok := k.(string)
			if !ok || !p.eat(':') {
				return nil, fmt.Errorf("at %d: a dictionary key must be a string followed by :", p.pos)
			}
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			m[ks] = v
			if !p.eat(',') {
				if !p.eat('}') {
					return nil, fmt.Errorf("at %d: want , or }", p.pos)
				}
				break
			}
		}
		return map[string]any{"type": "dict", "value": m}, nil
	case c == '-' || c == '.' || unicode.IsDigit(rune(c)):
		st := p.pos
		p.pos++
		for p.pos < len(p.src) && strings.ContainsRune("0123456789.eE+-_", rune(p.src[p.pos])) {
			p.pos++
		}
		f, err := strconv.ParseFloat(strings.ReplaceAll(p.src[st:p.pos], "_", ""), 64)
		if err != nil {
			return nil, fmt.Errorf("at %d: bad number %q", st, p.src[st:p.pos])
		}
		return f, nil
	}
	name := p.ident()
	switch name {
	case "":
		return nil, fmt.Errorf("at %d: unexpected %q", p.pos, p.src[p.pos])
	case "True":
		return true, nil
	case "False":
		return false, nil
	case "None":
		return nil, nil
	}
	if p.eat('(') {
		return nil, fmt.Errorf("nested function calls are not permitted (%s(...))", name)
	}
	if !p.eat('.') {
		return nil, fmt.Errorf("%s: names are not values (only literals and enum members such as CacheMode.BYPASS)", name)
	}
	member := p.ident()
	if p.eat('(') {
		return nil, fmt.Errorf("nested function calls are not permitted (%s.%s(...))", name, member)
	}
	if _, ok := c4aEnums[name]; !ok {
		return nil, fmt.Errorf("%s.%s: unknown enum (known: CacheMode)", name, member)
	}
	return map[string]any{"type": name, "params": strings.ToLower(member)}, nil
}

func (p *pyParser) str(q byte) (string, error) {
	p.pos++
	var b strings.Builder
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch {
		case c == q:
			p.pos++
			return b.String(), nil
		case c == '\\' && p.pos+1 < len(p.src):
			p.pos++
			switch e := p.src[p.pos]; e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			default:
				b.WriteByte(e)
			}
		default:
			b.WriteByte(c)
		}
		p.pos++
	}
	return "", fmt.Errorf("unterminated string")
}
