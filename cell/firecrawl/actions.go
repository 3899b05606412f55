package firecrawl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/trawlhq/trawl/cell/fetch"
)

// Bounds of the actions, Firecrawl's where it has one.
const (
	// maxActionWait is Firecrawl's bound of waitFor and the wait actions
	// together (a wait for a selector counts as a second).
	maxActionWait = 60 * time.Second
	maxText       = 64 << 10 // write's text, executeJavascript's script
)

// action is one entry of actions as Firecrawl's API takes it. Pointers
// tell an absent field from its zero.
type action struct {
	Type         string          `json:"type"`
	Milliseconds *float64        `json:"milliseconds"`
	Selector     *string         `json:"selector"`
	All          *bool           `json:"all"`
	Text         *string         `json:"text"`
	Key          *string         `json:"key"`
	Direction    *string         `json:"direction"`
	FullPage     *bool           `json:"fullPage"`
	Quality      *float64        `json:"quality"`
	Viewport     json.RawMessage `json:"viewport"`
	Script       *string         `json:"script"`
}

// actions translates the actions list into the browser's, refusing a bad
// action with the path of its field (actions.<i>.<field>). waitFor and
// timeout are the request's, in milliseconds (timeout 0: none set): the
// waits must fit in both.
func actions(raw []json.RawMessage, field string, waitFor int64, timeout time.Duration) ([]fetch.Action, error) {
	if len(raw) > fetch.MaxActions {
		return nil, BadRequest(field+"actions", fmt.Sprintf("Number of actions cannot exceed %d", fetch.MaxActions))
	}
	out := make([]fetch.Action, 0, len(raw))
	waits := time.Duration(waitFor) * time.Millisecond // what the page is kept waiting
	counted := waits                                   // the same, a selector counted as a second (Firecrawl's rule)
	for i, r := range raw {
		name := fmt.Sprintf("%sactions.%d", field, i)
		a, err := oneAction(r, name)
		if err != nil {
			return nil, err
		}
		waits += a.Wait
		counted += a.Wait
		if a.Type == fetch.ActionWait && a.Selector != "" {
			counted += time.Second
		}
		out = append(out, a)
	}
	if counted > maxActionWait {
		return nil, BadRequest(field+"actions", "Total wait time (waitFor + wait actions) cannot exceed 60 seconds")
	}
	if timeout > 0 && waits >= timeout {
		return nil, BadRequest(field+"actions", fmt.Sprintf("the waits (waitFor and wait actions, %d ms) leave no time within timeout (%d ms)", waits.Milliseconds(), timeout.Milliseconds()))
	}
	return out, nil
}

// oneAction reads and checks one action; name is its path.
func oneAction(raw json.RawMessage, name string) (fetch.Action, error) {
	var a action
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&a); err != nil {
		if te, ok := err.(*json.UnmarshalTypeError); ok && te.Field != "" {
			return fetch.Action{}, BadRequest(name+"."+te.Field, fmt.Sprintf("%s must be a %s", te.Field, te.Type))
		}
		return fetch.Action{}, BadRequest(name, "an action is an object with a type")
	}
	out := fetch.Action{Type: a.Type}
	need := func(v *string, what string) (string, error) {
		if v == nil || *v == "" {
			return "", BadRequest(name+"."+what, fmt.Sprintf("a %s action needs a %s", a.Type, what))
		}
		if len(*v) > maxText {
			return "", BadRequest(name+"."+what, fmt.Sprintf("%s is at most %d bytes", what, maxText))
		}
		return *v, nil
	}
	var err error
	switch a.Type {
	case fetch.ActionWait:
		switch {
		case (a.Milliseconds == nil) == (a.Selector == nil):
			return out, BadRequest(name, "Either 'milliseconds' or 'selector' must be provided, but not both.")
		case a.Milliseconds != nil:
			ms := *a.Milliseconds
			if ms <= 0 || ms != math.Trunc(ms) || ms > float64(maxActionWait.Milliseconds()) {
				return out, BadRequest(name+".milliseconds", "milliseconds is a positive whole number, at most 60000")
			}
			out.Wait = time.Duration(ms) * time.Millisecond
		default:
			out.Selector, err = need(a.Selector, "selector")
		}
	case fetch.ActionClick:
		out.Selector, err = need(a.Selector, "selector")
		out.All = a.All != nil && *a.All
	case fetch.ActionWrite:
		if a.Text == nil {
			return out, BadRequest(name+".text", "a write action needs a text")
		}
		if len(*a.Text) > maxText {
			return out, BadRequest(name+".text", fmt.Sprintf("text is at most %d bytes", maxText))
		}
		out.Text = *a.Text
	case fetch.ActionPress:
		out.Key, err = need(a.Key, "key")
	case fetch.ActionScroll:
		if a.Direction != nil {
			switch *a.Direction {
			case "up":
				out.Up = true
			case "down":
			default:
				return out, BadRequest(name+".direction", fmt.Sprintf("direction is up or down (got %q)", *a.Direction))
			}
		}
		if a.Selector != nil {
			out.Selector, err = need(a.Selector, "selector")
		}
	case fetch.ActionScreenshot:
		out.FullPage = a.FullPage != nil && *a.FullPage
		if a.Quality != nil {
			q := *a.Quality
			if q < 1 || q > 100 || q != math.Trunc(q) {
				return out, BadRequest(name+".quality", "quality is a whole number from 1 to 100")
			}
			out.Quality = int(q)
		}
		if isSet(a.Viewport) {
			return out, Unsupported(name+".viewport", "a screenshot's own viewport is not supported; use mobile for a phone's")
		}
	case fetch.ActionScript:
		out.Script, err = need(a.Script, "script")
	case fetch.ActionScrape:
	case "pdf":
		return out, Unsupported(name, "the pdf action is not supported by trawl")
	case "":
		return out, BadRequest(name+".type", "an action needs a type")
	default:
		return out, BadRequest(name+".type", fmt.Sprintf("unknown action type %q (wait, click, write, press, scroll, screenshot, executeJavascript, scrape)", a.Type))
	}
	return out, err
}
