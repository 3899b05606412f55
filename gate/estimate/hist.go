package estimate

import (
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
)

// hist is a fixed log-linear histogram of token counts: 0 to 15 exactly,
// then eight buckets per power of two (so a bucket is at most 1/8 of its
// values wide) up to 2^31. Adding is two increments; percentiles walk 232
// counters.
type hist struct {
	c [nBuckets]uint64
	n uint64
}

const (
	nBuckets = 16 + (31-4)*8
	maxValue = 1<<31 - 1
)

func bucketOf(v int) int {
	if v < 16 {
		return max(v, 0)
	}
	u := uint64(min(v, maxValue))
	e := bits.Len64(u) - 1 // 4..30
	m := int(u>>(e-3)) & 7
	return 16 + (e-4)*8 + m
}

// bucketLow is the smallest value of bucket i.
func bucketLow(i int) int {
	if i < 16 {
		return i
	}
	e := 4 + (i-16)/8
	m := (i - 16) % 8
	return (8 + m) << (e - 3)
}

// bucketHigh is the largest value of bucket i.
func bucketHigh(i int) int {
	if i >= nBuckets-1 {
		return maxValue
	}
	return bucketLow(i+1) - 1
}

func (h *hist) add(v int) {
	h.c[bucketOf(v)]++
	h.n++
}

func (h *hist) halve() {
	h.n = 0
	for i := range h.c {
		h.c[i] /= 2
		h.n += h.c[i]
	}
}

// bucketAt is the bucket holding the q-quantile (0 < q ≤ 1).
func (h *hist) bucketAt(q float64) int {
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	var sum uint64
	for i, c := range h.c {
		sum += c
		if sum >= rank {
			return i
		}
	}
	return nBuckets - 1
}

// lower is the smallest value the q-quantile may have; upper the largest.
func (h *hist) lower(q float64) int { return bucketLow(h.bucketAt(q)) }
func (h *hist) upper(q float64) int { return bucketHigh(h.bucketAt(q)) }

// Encoding of E/t/<kind>: a version byte, then for the input and the
// output histogram the number of non-empty buckets and a (bucket, count)
// uvarint pair for each.
const tokensV1 = 1

func encodeTokens(in, out *hist) []byte {
	b := []byte{tokensV1}
	for _, h := range [2]*hist{in, out} {
		nz := 0
		for _, c := range h.c {
			if c != 0 {
				nz++
			}
		}
		b = binary.AppendUvarint(b, uint64(nz))
		for i, c := range h.c {
			if c != 0 {
				b = binary.AppendUvarint(b, uint64(i))
				b = binary.AppendUvarint(b, c)
			}
		}
	}
	return b
}

var errCorruptTokens = errors.New("corrupt token histogram")

func decodeTokens(b []byte, in, out *hist) error {
	if len(b) == 0 || b[0] != tokensV1 {
		return errCorruptTokens
	}
	b = b[1:]
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	var tmp [2]hist
	for k := range tmp {
		nz, ok := next()
		if !ok || nz > nBuckets {
			return errCorruptTokens
		}
		for range nz {
			i, ok1 := next()
			c, ok2 := next()
			if !ok1 || !ok2 || i >= nBuckets {
				return errCorruptTokens
			}
			tmp[k].c[i] = c
			tmp[k].n += c
		}
	}
	if len(b) != 0 {
		return errCorruptTokens
	}
	*in, *out = tmp[0], tmp[1]
	return nil
}
