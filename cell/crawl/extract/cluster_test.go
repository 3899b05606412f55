package extract

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// naiveAgglomerate is the textbook algorithm: merge the closest pair of
// clusters, update with the Lance-Williams formula, repeat; then cut.
func naiveAgglomerate(n int, dist func(i, j int) float64, method string, maxDist float64) []int {
	d := make([][]float64, n)
	for i := range d {
		d[i] = make([]float64, n)
		for j := range d[i] {
			if i != j {
				d[i][j] = dist(min(i, j), max(i, j))
			}
		}
	}
	members := make([][]int, n)
	size := make([]float64, n)
	for i := range n {
		members[i], size[i] = []int{i}, 1
	}
	label := make([]int, n)
	for i := range label {
		label[i] = i
	}
	active := map[int]bool{}
	for i := range n {
		active[i] = true
	}
	for len(active) > 1 {
		bi, bj, bd := -1, -1, math.Inf(1)
		for i := range n {
			for j := i + 1; j < n; j++ {
				if active[i] && active[j] && d[i][j] < bd {
					bi, bj, bd = i, j, d[i][j]
				}
			}
		}
		if bd <= maxDist {
			to, from := label[members[bi][0]], label[members[bj][0]]
			for i := range label {
				if label[i] == from {
					label[i] = to
				}
			}
		}
		ni, nj := size[bi], size[bj]
		for k := range n {
			if !active[k] || k == bi || k == bj {
				continue
			}
			dik, djk, nk := d[bi][k], d[bj][k], size[k]
			var nd float64
			switch method {
			case "single":
				nd = math.Min(dik, djk)
			case "complete":
				nd = math.Max(dik, djk)
			case "average":
				nd = (ni*dik + nj*djk) / (ni + nj)
			case "weighted":
				nd = (dik + djk) / 2
			case "ward":
				nd = math.Sqrt(((ni+nk)*dik*dik + (nj+nk)*djk*djk - nk*bd*bd) / (ni + nj + nk))
			}
			d[bi][k], d[k][bi] = nd, nd
		}
		members[bi] = append(members[bi], members[bj]...)
		size[bi] += nj
		delete(active, bj)
	}
	// Name each cluster by its smallest point, as agglomerate does.
	smallest := map[int]int{}
	for i, l := range label {
		if _, ok := smallest[l]; !ok {
			smallest[l] = i
		}
	}
	out := make([]int, n)
	for i, l := range label {
		out[i] = smallest[l]
	}
	return out
}

func TestAgglomerateMatchesNaive(t *testing.T) {
	for _, method := range []string{"single", "complete", "average", "weighted", "ward"} {
		for seed := range uint64(20) {
			r := rand.New(rand.NewPCG(seed, 42))
			n := 2 + r.IntN(40)
			// Points in a few blobs, so that some cuts are interesting.
			xs, ys := make([]float64, n), make([]float64, n)
			for i := range n {
				c := float64(r.IntN(4))
				xs[i], ys[i] = c*3+r.NormFloat64(), c*2+r.NormFloat64()
			}
			dist := func(i, j int) float64 { return math.Hypot(xs[i]-xs[j], ys[i]-ys[j]) }
			for _, cut := range []float64{0, 0.5, 1, 2, 4, 100} {
				t.Run(fmt.Sprintf("%s/seed%d/n%d/cut%g", method, seed, n, cut), func(t *testing.T) {
					got := agglomerate(n, dist, method, cut)
					want := naiveAgglomerate(n, dist, method, cut)
					if fmt.Sprint(got) != fmt.Sprint(want) {
						t.Errorf("labels\n got %v\nwant %v", got, want)
					}
				})
			}
		}
	}
}

func TestAgglomerateSmall(t *testing.T) {
	if got := agglomerate(0, nil, "average", 1); len(got) != 0 {
		t.Errorf("n=0: %v", got)
	}
	if got := agglomerate(1, nil, "average", 1); fmt.Sprint(got) != "[0]" {
		t.Errorf("n=1: %v", got)
	}
	// 0-1 close, 2 far; ties resolved to the lowest index.
	d := map[[2]int]float64{{0, 1}: 0.1, {0, 2}: 0.9, {1, 2}: 0.9}
	dist := func(i, j int) float64 { return d[[2]int{i, j}] }
	if got := agglomerate(3, dist, "average", 0.5); fmt.Sprint(got) != "[0 0 2]" {
		t.Errorf("got %v, want [0 0 2]", got)
	}
	if got := agglomerate(3, dist, "complete", 0.9); fmt.Sprint(got) != "[0 0 0]" {
		t.Errorf("cut is inclusive: got %v, want [0 0 0]", got)
	}
}
