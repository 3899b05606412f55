package extract

import "context"

// basicStrategy splits the page's Markdown into paragraph blocks.
type basicStrategy struct{}

func (basicStrategy) Name() string { return "basic" }

func (basicStrategy) Extract(ctx context.Context, p Page) (string, error) {
	paras := paragraphs(pageMarkdown(p))
	blocks := make([]block, len(paras))
	for i, s := range paras {
		blocks[i] = block{Index: i, Tags: []string{}, Content: s}
	}
	return marshal(blocks)
}

var _ Strategy = basicStrategy{}
