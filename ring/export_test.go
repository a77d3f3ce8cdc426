package ring

import "math/big"

// big returns p as a big.Int, for tests against big-integer models.
func (p Position) big() *big.Int {
	b := new(big.Int).SetUint64(p.Hi)
	b.Lsh(b, 64)
	return b.Or(b, new(big.Int).SetUint64(p.Lo))
}

// points returns the ring's points, for tests.
func (r *Ring) points() []point {
	out := make([]point, r.pts.len())
	for i := range out {
		out[i] = point{pos: r.pts.pos(i), bucket: r.pts.bucket(i)}
	}
	return out
}
