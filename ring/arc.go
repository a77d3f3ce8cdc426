package ring

import (
	"math/big"
	"math/bits"
)

// span is a count of hash-space positions. It needs one bit more than a
// position: a bucket that owns the whole ring owns exactly 2^128 of them.
type span struct {
	carry, hi, lo uint64
}

// distance returns the number of positions in (from, to] going clockwise:
// (to - from) mod 2^128. It is zero when from == to; callers that walk round
// the whole ring from a point back to itself use wrapDistance instead.
func distance(from, to Position) span {
	lo, borrow := bits.Sub64(to.Lo, from.Lo, 0)
	hi, _ := bits.Sub64(to.Hi, from.Hi, borrow) // a borrow is the wrap past 2^128-1
	return span{hi: hi, lo: lo}
}

// wrapDistance is distance for the arc that closes the ring, from the last
// point round to the first: when they coincide it spans the whole space.
func wrapDistance(from, to Position) span {
	if d := distance(from, to); !d.isZero() {
		return d
	}
	return span{carry: 1}
}

func (s span) add(t span) span {
	lo, c := bits.Add64(s.lo, t.lo, 0)
	hi, c := bits.Add64(s.hi, t.hi, c)
	return span{carry: s.carry + t.carry + c, hi: hi, lo: lo}
}

func (s span) isZero() bool { return s == span{} }

// whole is 2^128, the size of the hash space.
var whole = new(big.Float).SetMantExp(big.NewFloat(1), 128)

// fraction converts s to its share of the hash space, correctly rounded:
// the integer is exact until this one conversion.
func (s span) fraction() float64 {
	n := new(big.Int).SetUint64(s.carry)
	n.Lsh(n, 64).Or(n, new(big.Int).SetUint64(s.hi))
	n.Lsh(n, 64).Or(n, new(big.Int).SetUint64(s.lo))
	f := new(big.Float).SetPrec(256).SetInt(n)
	f.Quo(f, whole)
	v, _ := f.Float64()
	return v
}
