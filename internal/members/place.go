package members

import "hash/fnv"

// Rendezvous picks the cell with the highest hash of (its name, key):
// every gate picks the same one for as long as the set of cells holds it.
// The gate places keyed submissions and the objects of a down owner with
// it, and a region's job ids (Placed) by it.
func Rendezvous(cells []Meta, key string) (Meta, bool) {
	var best Meta
	var bestH uint64
	for _, c := range cells {
		if v := rank(c.Name, key); best.Name == "" || v > bestH {
			best, bestH = c, v
		}
	}
	return best, best.Name != ""
}

func rank(name, key string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return h.Sum64()
}

// Placed returns the cells whose JetStream node is ready: the ones that
// answer for a region's objects from its job log, among which a gate
// places an object id that names no cell (Rendezvous over the id).
func Placed(cells []Meta) []Meta {
	var out []Meta
	for _, c := range cells {
		if c.JS == JSReady {
			out = append(out, c)
		}
	}
	return out
}
