package extract

import (
	"context"
	"math"
	"sort"
	"strings"
)

// Defaults and bounds of the cosine strategy.
const (
	DefaultCosineWordCountThreshold = 10
	DefaultCosineMaxDist            = 0.2
	DefaultCosineTopK               = 3
	DefaultCosineLinkage            = "average"
	DefaultCosineSimThreshold       = 0.05
	// MaxCosineBlocks caps the blocks that are clustered (the clustering
	// is O(n²) in time and memory): with a filter, the most similar ones
	// are kept, else the first ones.
	MaxCosineBlocks = 2000
	cosineTags      = 5
)

type cosineStrategy struct {
	filter        string
	wordThreshold int
	maxDist       float64
	topK          int
	linkage       string
	simThreshold  float64
	maxBlocks     int
}

func (cosineStrategy) Name() string { return "cosine" }

func newCosine(p params) (Strategy, error) {
	s := cosineStrategy{
		wordThreshold: DefaultCosineWordCountThreshold,
		maxDist:       DefaultCosineMaxDist,
		topK:          DefaultCosineTopK,
		linkage:       DefaultCosineLinkage,
		simThreshold:  DefaultCosineSimThreshold,
		maxBlocks:     MaxCosineBlocks,
	}
	var err error
	if s.filter, _, err = p.str("semantic_filter"); err != nil {
		return nil, err
	}
	if v, ok, err := p.integer("word_count_threshold"); err != nil {
		return nil, err
	} else if ok {
		if v < 0 {
			return nil, badParams(p.field("word_count_threshold"), "must be 0 or more")
		}
		s.wordThreshold = v
	}
	if v, ok, err := p.float("max_dist"); err != nil {
		return nil, err
	} else if ok {
		if v < 0 {
			return nil, badParams(p.field("max_dist"), "must be 0 or more")
		}
		s.maxDist = v
	}
	if v, ok, err := p.integer("top_k"); err != nil {
		return nil, err
	} else if ok {
		if v < 1 {
			return nil, badParams(p.field("top_k"), "must be 1 or more")
		}
		s.topK = v
	}
	if v, ok, err := p.str("linkage_method"); err != nil {
		return nil, err
	} else if ok && v != "" {
		if !linkages[v] {
			return nil, badParams(p.field("linkage_method"), "unknown linkage %q (want single, complete, average, weighted or ward)", v)
		}
		s.linkage = v
	}
	if v, ok, err := p.float("sim_threshold"); err != nil {
		return nil, err
	} else if ok {
		if v < -1 || v > 1 {
			return nil, badParams(p.field("sim_threshold"), "must be between -1 and 1")
		}
		s.simThreshold = v
	}
	return s, nil
}

type cosineBlock struct {
	text  string
	words int
	vec   vector
	sim   float64 // to the filter
	order int     // position on the page
}

func (s cosineStrategy) Extract(ctx context.Context, p Page) (string, error) {
	c := newCorpus()
	var blocks []cosineBlock
	var tfs []map[int]int
	for _, para := range paragraphs(pageMarkdown(p)) {
		plain := plainText(para)
		n := wordCount(plain)
		if n < s.wordThreshold {
			continue
		}
		tfs = append(tfs, c.add(tokenize(plain)))
		blocks = append(blocks, cosineBlock{text: para, words: n, order: len(blocks)})
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	for i := range blocks {
		blocks[i].vec = c.vectorize(tfs[i])
	}

	var fv vector
	filtered := strings.TrimSpace(s.filter) != ""
	if filtered {
		fv = c.query(s.filter)
		kept := blocks[:0]
		for _, b := range blocks {
			b.sim = dot(fv, b.vec)
			if b.sim > 0 && b.sim >= s.simThreshold {
				kept = append(kept, b)
			}
		}
		blocks = kept
	}
	if len(blocks) > s.maxBlocks {
		if filtered {
			sort.SliceStable(blocks, func(i, j int) bool { return blocks[i].sim > blocks[j].sim })
			blocks = blocks[:s.maxBlocks]
			sort.Slice(blocks, func(i, j int) bool { return blocks[i].order < blocks[j].order })
		} else {
			blocks = blocks[:s.maxBlocks]
		}
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}

	labels := agglomerate(len(blocks), func(i, j int) float64 {
		return math.Max(0, 1-dot(blocks[i].vec, blocks[j].vec))
	}, s.linkage, s.maxDist)

	type cluster struct {
		members []int // block indexes, in page order
		words   int
		score   float64
		centre  map[int]float64
	}
	byLabel := map[int]*cluster{}
	var clusters []*cluster
	for i, l := range labels {
		cl := byLabel[l]
		if cl == nil {
			cl = &cluster{centre: map[int]float64{}}
			byLabel[l] = cl
			clusters = append(clusters, cl)
		}
		cl.members = append(cl.members, i)
		cl.words += blocks[i].words
		for _, t := range blocks[i].vec {
			cl.centre[t.id] += t.w
		}
	}
	for _, cl := range clusters {
		if filtered {
			// Sum in term order: map order would make the last bits, and
			// so the ranking of near ties, vary between runs.
			cv := make(vector, 0, len(cl.centre))
			for id, w := range cl.centre {
				cv = append(cv, term{id: id, w: w})
			}
			sort.Slice(cv, func(i, j int) bool { return cv[i].id < cv[j].id })
			cl.score = dot(fv, normalize(cv))
		} else {
			cl.score = float64(cl.words)
		}
	}
	// clusters are in order of their first block; the stable sort keeps
	// that order among equals.
	sort.SliceStable(clusters, func(i, j int) bool {
		if clusters[i].score != clusters[j].score {
			return clusters[i].score > clusters[j].score
		}
		return clusters[i].words > clusters[j].words
	})
	if len(clusters) > s.topK {
		clusters = clusters[:s.topK]
	}

	out := make([]block, len(clusters))
	for i, cl := range clusters {
		texts := make([]string, len(cl.members))
		for j, m := range cl.members {
			texts[j] = blocks[m].text
		}
		out[i] = block{Index: i, Tags: topTerms(c, cl.centre, cosineTags), Content: strings.Join(texts, "\n\n")}
	}
	return marshal(out)
}

// topTerms names the k heaviest terms of a cluster centre.
func topTerms(c *corpus, centre map[int]float64, k int) []string {
	ids := make([]int, 0, len(centre))
	for id := range centre {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		a, b := centre[ids[i]], centre[ids[j]]
		if a != b {
			return a > b
		}
		return c.stems[ids[i]] < c.stems[ids[j]]
	})
	tags := []string{}
	for _, id := range ids[:min(k, len(ids))] {
		tags = append(tags, c.word(id))
	}
	return tags
}

var _ Strategy = cosineStrategy{}
