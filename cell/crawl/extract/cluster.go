package extract

import "math"

// Linkage methods of the cosine strategy, with scipy's meanings.
var linkages = map[string]bool{"single": true, "complete": true, "average": true, "weighted": true, "ward": true}

// agglomerate clusters n points by agglomerative hierarchical clustering
// on the distances dist(i, j) (i < j) with the given linkage, then cuts the
// tree at maxDist: it returns, for each point, the smallest point of its
// flat cluster. Like scipy's fcluster(linkage(d, method), maxDist,
// criterion="distance"), two points share a cluster when the merge that
// joins them is at a height of at most maxDist.
//
// It is the nearest-neighbour-chain algorithm (O(n²) time, n(n-1)/2
// distances in memory): all five linkages are reducible, so the merge
// heights are monotone and the cut is the union of the merges at or below
// maxDist, in whatever order the chain finds them. Ties go to the lowest
// index, so the result is deterministic.
func agglomerate(n int, dist func(i, j int) float64, method string, maxDist float64) []int {
	parent := make([]int, n)
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	union := func(a, b int) {
		ra, rb := find(a), find(b)
		if ra == rb {
			return
		}
		if ra < rb {
			parent[rb] = ra
		} else {
			parent[ra] = rb
		}
	}

	if n > 1 {
		d := make([]float64, n*(n-1)/2)
		at := func(i, j int) int {
			if i > j {
				i, j = j, i
			}
			return n*i - i*(i+1)/2 + (j - i - 1)
		}
		for i := range n {
			for j := i + 1; j < n; j++ {
				d[at(i, j)] = dist(i, j)
			}
		}
		active := make([]bool, n)
		size := make([]float64, n)
		for i := range n {
			active[i], size[i] = true, 1
		}
		chain := make([]int, 0, n)
		first := 0 // lowest active point
		for remaining := n; remaining > 1; {
			if len(chain) == 0 {
				for !active[first] {
					first++
				}
				chain = append(chain, first)
			}
			a := chain[len(chain)-1]
			best, bd := -1, math.Inf(1)
			if len(chain) >= 2 {
				best = chain[len(chain)-2]
				bd = d[at(a, best)]
			}
			for k := range n {
				if k != a && active[k] && d[at(a, k)] < bd {
					best, bd = k, d[at(a, k)]
				}
			}
			if len(chain) < 2 || best != chain[len(chain)-2] {
				chain = append(chain, best)
				continue
			}
			chain = chain[:len(chain)-2]
			// Merge a and best into the slot of the lower index.
			keep, drop := min(a, best), max(a, best)
			if bd <= maxDist {
				union(keep, drop)
			}
			ni, nj := size[keep], size[drop]
			for k := range n {
				if !active[k] || k == keep || k == drop {
					continue
				}
				dik, djk := d[at(keep, k)], d[at(drop, k)]
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
					nk := size[k]
					nd = math.Sqrt(math.Max(0, ((ni+nk)*dik*dik+(nj+nk)*djk*djk-nk*bd*bd)/(ni+nj+nk)))
				}
				d[at(keep, k)] = nd
			}
			size[keep] = ni + nj
			active[drop] = false
			remaining--
		}
	}
	labels := make([]int, n)
	for i := range labels {
		labels[i] = find(i)
	}
	return labels
}
