package ring

import (
	"cmp"
	"slices"
)

// Move is a part of the hash space that changes bucket: the users in it were
// served by From and are served by To. An empty From or To means no bucket
// (an empty ring), which no bucket can be named.
type Move struct {
	From, To string
	Share    float64 // fraction of the hash space
}

// Churn is what a change from one ring to another does to users.
type Churn struct {
	Total float64 // fraction of the hash space that changes bucket
	Moves []Move  // largest first; their shares add up to Total
}

// ChurnBetween returns the exact churn from ring a to ring b: the arcs of the
// hash space whose owner differs, summed per (from, to) pair with 128-bit
// integer arithmetic. It walks both sorted point lists once, O(n+m).
func ChurnBetween(a, b *Ring) Churn {
	type pair struct{ from, to string }
	moved := map[pair]span{}
	for w := range segments(a, b) {
		if w.from != w.to {
			k := pair{w.from, w.to}
			moved[k] = moved[k].add(w.size)
		}
	}

	var total span
	c := Churn{Moves: make([]Move, 0, len(moved))}
	for k, s := range moved {
		total = total.add(s)
		c.Moves = append(c.Moves, Move{From: k.from, To: k.to, Share: s.fraction()})
	}
	c.Total = total.fraction()
	slices.SortFunc(c.Moves, func(x, y Move) int {
		return cmp.Or(cmp.Compare(y.Share, x.Share), cmp.Compare(x.From, y.From), cmp.Compare(x.To, y.To))
	})
	return c
}

// segment is a stretch of the hash space with one owner in each ring.
type segment struct {
	from, to string // owners in the first and second ring; "" for none
	size     span
}

// segments yields the hash space cut at every point of a and b. Between two
// consecutive cuts every key has the same owner in each ring: the owner of
// the ring's first point at or after the upper cut.
func segments(a, b *Ring) func(yield func(segment) bool) {
	return func(yield func(segment) bool) {
		na, nb := a.Len(), b.Len()
		if na+nb == 0 {
			return
		}
		// Cut positions in ascending order, each once.
		cuts := make([]Position, 0, na+nb)
		i, j := 0, 0
		for i < na || j < nb {
			var p Position
			switch {
			case j == nb || (i < na && a.pts.pos(i).less(b.pts.pos(j))):
				p = a.pts.pos(i)
			default:
				p = b.pts.pos(j)
			}
			for i < na && a.pts.pos(i) == p {
				i++
			}
			for j < nb && b.pts.pos(j) == p {
				j++
			}
			cuts = append(cuts, p)
		}

		i, j = 0, 0
		for k, p := range cuts {
			for i < na && a.pts.less(i, p) {
				i++
			}
			for j < nb && b.pts.less(j, p) {
				j++
			}
			var size span
			if k == 0 {
				size = wrapDistance(cuts[len(cuts)-1], p)
			} else {
				size = distance(cuts[k-1], p)
			}
			if !yield(segment{from: a.ownerAt(i), to: b.ownerAt(j), size: size}) {
				return
			}
		}
	}
}

// ownerAt returns the owner of point i, wrapping past the last point to the
// first, or "" on an empty ring.
func (r *Ring) ownerAt(i int) string {
	n := r.Len()
	if n == 0 {
		return ""
	}
	if i == n {
		i = 0
	}
	return r.buckets[r.pts.bucket(i)].Name
}
