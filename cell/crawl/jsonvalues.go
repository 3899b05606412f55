package crawl

import (
	"encoding/json"
	"math"
	"strconv"
)

// Number is a JSON number that is always written as a float: 12.0, not 12.
// Python clients (Crawl4AI's among them) see a float one time and an int
// the next when Go's encoder drops the fraction of a whole value, and code
// such as `isinstance(x, float)` or a typed model breaks on the switch.
type Number float64

// MarshalJSON writes n with at least one decimal; NaN and infinities,
// which JSON cannot carry, are written as 0.0.
func (n Number) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("0.0"), nil
	}
	b := strconv.AppendFloat(nil, f, 'f', -1, 64)
	for _, c := range b {
		if c == '.' {
			return b, nil
		}
	}
	return append(b, '.', '0'), nil
}

// nullString is a string written as null when empty: Crawl4AI v0.4
// answered every result field, null when it had no value, and its
// clients index them (result["error_message"]).
type nullString string

func (s nullString) MarshalJSON() ([]byte, error) {
	if s == "" {
		return []byte("null"), nil
	}
	return json.Marshal(string(s))
}

// nullInt is an integer written as null when zero (a status code the page
// never got).
type nullInt int

func (n nullInt) MarshalJSON() ([]byte, error) {
	if n == 0 {
		return []byte("null"), nil
	}
	return strconv.AppendInt(nil, int64(n), 10), nil
}
