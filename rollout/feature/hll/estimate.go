package hll

import "math"

// Estimate returns the number of distinct users s has seen, by Ertl's
// improved raw estimator ("New cardinality estimation algorithms for
// HyperLogLog sketches", 2017, algorithm 6): exact-ish below a few
// thousand users, about RelativeError above, never negative.
func (s *Sketch) Estimate() float64 {
	var c [maxRank + 1]int
	for k := range s.regs {
		v := s.regs[k].Load()
		for j := range 4 {
			c[(v>>(j*8))&0xff]++
		}
	}
	if c[0] == M {
		return 0
	}
	const q = 64 - Precision
	z := M * tau(1-float64(c[q+1])/M)
	for k := q; k >= 1; k-- {
		z = 0.5 * (z + float64(c[k]))
	}
	z += M * sigma(float64(c[0])/M)
	return M * M / (2 * math.Ln2) / z
}

// Count is Estimate rounded to a whole number of users.
func (s *Sketch) Count() int64 { return int64(math.Round(s.Estimate())) }

// sigma is Ertl's σ(x) = x + Σ_{k≥1} x^(2^k)·2^(k-1), for x in [0, 1].
func sigma(x float64) float64 {
	if x == 1 {
		return math.Inf(1)
	}
	y, z := 1.0, x
	for {
		x *= x
		prev := z
		z += x * y
		y += y
		if z == prev {
			return z
		}
	}
}

// tau is Ertl's τ(x) = (1 - x - Σ_{k≥1} (1 - x^(2^-k))²·2^-k) / 3, for x
// in [0, 1].
func tau(x float64) float64 {
	if x == 0 || x == 1 {
		return 0
	}
	y, z := 1.0, 1-x
	for {
		x = math.Sqrt(x)
		prev := z
		y *= 0.5
		z -= (1 - x) * (1 - x) * y
		if z == prev {
			return z / 3
		}
	}
}
