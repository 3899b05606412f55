package search

import (
	"bytes"
	"sync"

	"github.com/blevesearch/bleve/v2/analysis"
	porterstemmer "github.com/blevesearch/go-porterstemmer"
)

// stemCache gives the stems of bleve's Porter token filter
// (porter.PorterStemmer) with a memory of the stems of the words it has
// stemmed: a page's words are mostly words other pages had, so most
// stems are a map lookup instead of Porter's rules (docs/performance.md,
// "Search"). It is safe for
// concurrent use (bleve analyses a batch's documents in parallel).
type stemCache struct {
	mu    sync.RWMutex
	stems map[string][]byte // term → its stem; a stem is never modified
}

// maxStems bounds the memory: about 100 bytes a word; past it, words not
// yet seen are stemmed each time (a cell's vocabulary rarely gets there).
const maxStems = 1 << 18

func newStemCache() *stemCache { return &stemCache{stems: make(map[string][]byte, 1<<12)} }

// stem is term's Porter stem (term lower-cased). The stem returned is
// shared and never written: bleve reads a term only to count it.
func (c *stemCache) stem(term []byte) []byte {
	c.mu.RLock()
	st, ok := c.stems[string(term)]
	full := len(c.stems) >= maxStems
	c.mu.RUnlock()
	if ok {
		return st
	}
	st = analysis.BuildTermFromRunes(porterstemmer.StemWithoutLowerCasing(bytes.Runes(term)))
	if !full { // once full, a miss does not queue on the write lock
		c.mu.Lock()
		if len(c.stems) < maxStems {
			c.stems[string(term)] = st
		}
		c.mu.Unlock()
	}
	return st
}
