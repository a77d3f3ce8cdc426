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
	n := r.pts.len()
	if n == 0 {
		return spans
	}
	// Point i serves (points[i-1], points[i]]; the first point also serves
	// the arc that wraps past the last point.
	spans[r.pts.bucket(0)] = wrapDistance(r.pts.pos(n-1), r.pts.pos(0))
	for i := 1; i < n; i++ {
		b := r.pts.bucket(i)
		spans[b] = spans[b].add(distance(r.pts.pos(i-1), r.pts.pos(i)))
	}
	return spans
}
