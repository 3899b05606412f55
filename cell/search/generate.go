package search

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/trawlhq/trawl/cell/llm"
	"github.com/trawlhq/trawl/internal/searchapi"
)

// noAnswer is what the model is told to reply when the passages do not
// answer.
const noAnswer = "NO_ANSWER"

var citeMark = regexp.MustCompile(`\s*\[(\d{1,2})\]`)

// Generate has the model answer q from ps only, citing them.
func Generate(ctx context.Context, c *llm.Client, q string, ps []searchapi.Passage) (*searchapi.Generated, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "Question: %s\n\nPassages:\n", q)
	for i, p := range ps {
		fmt.Fprintf(&b, "[%d] %s (%s)\n%s\n\n", i+1, p.Title, p.URL, strings.TrimSpace(p.Text))
	}
	comp, err := c.Complete(ctx, llm.Request{Temperature: 0, Messages: []llm.Message{
		{Role: "system", Content: "You answer a question from the numbered passages given, and from nothing else. " +
			"Answer in at most three sentences, in the question's language, and cite each passage you use as [n] after the sentence that uses it. " +
			"If the passages do not answer the question, reply exactly " + noAnswer + "."},
		{Role: "user", Content: b.String()},
	}})
	out := &searchapi.Generated{}
	if comp != nil {
		out.InTokens, out.OutTokens = comp.Usage.InTokens, comp.Usage.OutTokens
	}
	if err != nil {
		return out, err
	}
	text := strings.TrimSpace(comp.Content)
	if strings.Contains(text, noAnswer) {
		return out, nil
	}
	seen := map[int]bool{}
	for _, m := range citeMark.FindAllStringSubmatch(text, -1) {
		n, _ := strconv.Atoi(m[1])
		if n >= 1 && n <= len(ps) && !seen[n-1] {
			seen[n-1] = true
			out.Cited = append(out.Cited, n-1)
		}
	}
	out.Text = strings.TrimSpace(citeMark.ReplaceAllString(text, ""))
	return out, nil
}
