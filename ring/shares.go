package ring

// Shares returns the exact fraction of the hash space, and so of users, that
// each bucket serves. Every bucket appears, with 0 if it owns no arc; the
// fractions are exact sums of 128-bit arcs converted once, and the underlying
// integers add up to exactly 2^128. An empty ring returns an empty map.
func (r *Ring) Shares() map[string]float64 {
	spans := r.spans() // accepts a nil r, as the other methods do
	out := make(map[string]float64, len(spans))
	for i, s := range spans {
		out[r.buckets[i].Name] = s.fraction()
	}
	return out
}

// spans returns the number of positions each bucket serves, by bucket index.
func (r *Ring) spans() []span {
	if r == nil {
		return nil
	}
	spans := make([]span, len(r.buckets))
	n := len(r.points)
	if n == 0 {
		return spans
	}
	// Point i serves (points[i-1], points[i]]; the first point also serves
	// the arc that wraps past the last point.
	first := r.points[0]
	spans[first.bucket] = wrapDistance(r.points[n-1].pos, first.pos)
	for i := 1; i < n; i++ {
		p := r.points[i]
		spans[p.bucket] = spans[p.bucket].add(distance(r.points[i-1].pos, p.pos))
	}
	return spans
}
