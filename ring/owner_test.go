package ring

import (
	"math/rand/v2"
	"testing"
)

// TestOwnerIsLookup checks Owner against the built ring on random rings and
// positions, the edges included: a point's own position, just past the last
// point (which wraps round), and a ring without points.
func TestOwnerIsLookup(t *testing.T) {
	forRandomRings(t, func(t *testing.T, rng *rand.Rand, bs []Bucket, r *Ring) {
		positions := []Position{{}, {Hi: ^uint64(0), Lo: ^uint64(0)}}
		for range 200 {
			positions = append(positions, Position{Hi: rng.Uint64(), Lo: rng.Uint64()})
		}
		for _, p := range r.points()[:min(len(r.points()), 20)] {
			positions = append(positions, p.pos, Position{Hi: p.pos.Hi, Lo: p.pos.Lo + 1})
		}
		points := make([][]Position, len(bs))
		for i, b := range bs {
			points[i] = AppendPoints(nil, b.Name, 0, b.Replicas+rng.IntN(3)) // extra points are not read
		}
		for _, h := range positions {
			got, gotOK := Owner(bs, points, h)
			want, wantOK := r.LookupPosition(h)
			if got != want || gotOK != wantOK {
				t.Fatalf("Owner(%v, %v) = %q, %v; want %q, %v", bs, h, got, gotOK, want, wantOK)
			}
		}
	})
	if b, ok := Owner([]Bucket{{Name: "A", Replicas: 0}}, [][]Position{AppendPoints(nil, "A", 0, 2)}, Position{}); ok {
		t.Errorf("Owner on a ring without points = %q, true; want false", b)
	}
}
