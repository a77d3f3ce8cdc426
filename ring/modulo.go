package ring

import (
	"math/big"
	"slices"
)

// ModuloChurn returns the fraction of users that naive modulo assignment would
// move for the same change from a to b: before, a user at position h is served
// by the (h mod N)-th of a's N bucket names in sorted order; after, by the
// (h mod M)-th of b's M names. Replicas play no part in it.
//
// How it is computed: whether a user moves depends only on h mod L, where
// L = lcm(N, M), so the result is the exact fraction of moving residues over
// one period of L. By the Chinese remainder theorem the residues map one to
// one onto the pairs (x, y) with x in [0, N), y in [0, M) and
// x ≡ y (mod gcd(N, M)); a user stays exactly when both indexes name the same
// bucket. So the users who stay are the buckets present in both rings whose
// sorted indexes agree modulo gcd(N, M), each worth one residue, and the
// whole computation is O(N + M) however large L is. The fraction over the
// 2^128 hash space differs from this by less than L/2^128.
func ModuloChurn(a, b *Ring) float64 {
	an, bn := names(a), names(b)
	n, m := len(an), len(bn)
	switch {
	case n == 0 && m == 0:
		return 0
	case n == 0 || m == 0:
		return 1
	}
	g := gcd(n, m)
	stay := int64(0)
	for x, name := range an {
		if y, ok := slices.BinarySearch(bn, name); ok && x%g == y%g {
			stay++
		}
	}
	period := new(big.Int).Mul(big.NewInt(int64(n/g)), big.NewInt(int64(m)))
	moved := new(big.Rat).SetFrac(new(big.Int).Sub(period, big.NewInt(stay)), period)
	f, _ := moved.Float64()
	return f
}

// names returns the names of the buckets that own at least one point, sorted.
func names(r *Ring) []string {
	var out []string
	for _, b := range r.Buckets() {
		if b.Replicas > 0 {
			out = append(out, b.Name)
		}
	}
	return out
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
