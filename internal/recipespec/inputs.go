package recipespec

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
)

// Coerce reads raw as in's type: a string, an int64 (an integral number),
// a bool, or a date as "YYYY-MM-DD". The error says what the value must
// be, never what it was (a secret's value is not echoed).
func Coerce(in *Input, raw json.RawMessage) (any, error) {
	switch in.Type {
	case TypeString:
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, errors.New("must be a string")
		}
		return s, nil
	case TypeInteger:
		var f float64
		if err := json.Unmarshal(raw, &f); err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			return nil, errors.New("must be an integer")
		}
		return int64(f), nil
	case TypeBoolean:
		var b bool
		if err := json.Unmarshal(raw, &b); err != nil {
			return nil, errors.New("must be true or false")
		}
		return b, nil
	case TypeDate:
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, errors.New("must be a date, YYYY-MM-DD")
		}
		d, err := time.Parse(time.DateOnly, s)
		if err != nil {
			return nil, errors.New("must be a date, YYYY-MM-DD")
		}
		return d.Format(time.DateOnly), nil
	}
	return nil, fmt.Errorf("unknown type %q", in.Type)
}
