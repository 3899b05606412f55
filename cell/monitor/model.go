package monitor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/trawlhq/trawl/cell/llm"
	"github.com/trawlhq/trawl/cell/monitor/diff"
	"github.com/trawlhq/trawl/cell/monitor/watch"
)

// Model is the operator's language model (cell/llm, the client /extract
// uses) reading watch sentences: Split replaces the rule splitter (a
// failure is the spec's 503 at create and patch), Judge decides which
// conditions a change's facts satisfy (a failure falls back to the rules:
// a check never loses a change to the model). Without a model the rules
// of cell/monitor/watch do both.
type Model struct {
	Client *llm.Client
	// Timeout bounds one call (default 30 s).
	Timeout time.Duration
}

// maxConditionText bounds one condition the model writes.
const maxConditionText = 500

const splitPrompt = `You read one sentence in which a user says which changes of a web page they want to be told about.
Split it into independent conditions: each one self-contained clause, in the user's own words, that could hold or not on its own.
Keep every condition the sentence states, add none, keep their order; at most 20.
Answer with one JSON object: {"conditions": ["...", "..."]}.`

const judgePrompt = `You decide which of a user's conditions a detected change of a web page satisfies.
The change is a list of facts, each {kind: changed|added|removed, entity, field, before, after, section}.
A condition holds only if the facts show it: a numeric threshold must hold for the value after the change
(and for "drops below" / "rises above", the value before must have been on the other side).
Answer with one JSON object: {"matched": ["<id>", ...]}, the ids of the conditions that hold, [] when none does.`

func (m *Model) call(ctx context.Context, system, user string, out any) error {
	timeout := m.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	text, err := m.Client.CompleteJSON(ctx, llm.Request{
		Messages:       []llm.Message{{Role: "system", Content: system}, {Role: "user", Content: user}},
		ResponseFormat: llm.JSONObject(),
	})
	if err != nil {
		return err
	}
	return json.Unmarshal([]byte(text), out)
}

// Split splits sentence into conditions c1…cn with the model.
func (m *Model) Split(ctx context.Context, sentence string) ([]watch.Condition, error) {
	var ans struct {
		Conditions []string `json:"conditions"`
	}
	if err := m.call(ctx, splitPrompt, sentence, &ans); err != nil {
		return nil, fmt.Errorf("model split: %w", err)
	}
	var out []watch.Condition
	for _, c := range ans.Conditions {
		c = strings.TrimSpace(c)
		if c == "" {
			continue
		}
		if utf8.RuneCountInString(c) > maxConditionText || len(out) == watch.MaxConditions {
			return nil, errors.New("model split: a condition too long or too many")
		}
		out = append(out, watch.Condition{ID: fmt.Sprintf("c%d", len(out)+1), Text: c})
	}
	if len(out) == 0 {
		return nil, errors.New("model split: no condition")
	}
	return out, nil
}

// Judge returns the ids of conds that facts satisfy, in the order of
// conds, by the model.
func (m *Model) Judge(ctx context.Context, conds []watch.Condition, facts []diff.Fact) ([]string, error) {
	in, err := json.Marshal(map[string]any{"conditions": conds, "facts": facts})
	if err != nil {
		return nil, err
	}
	var ans struct {
		Matched []string `json:"matched"`
	}
	if err := m.call(ctx, judgePrompt, string(in), &ans); err != nil {
		return nil, fmt.Errorf("model judge: %w", err)
	}
	said := map[string]bool{}
	for _, id := range ans.Matched {
		said[id] = true
	}
	out := []string{}
	for _, c := range conds {
		if said[c.ID] {
			out = append(out, c.ID)
			delete(said, c.ID)
		}
	}
	if len(said) > 0 {
		return nil, fmt.Errorf("model judge: unknown condition ids %v", keys(said))
	}
	return out, nil
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
