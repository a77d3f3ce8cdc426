package ring

import "math/bits"

// index narrows a lookup to the few points that share the key's leading bits,
// so that Lookup costs little more than hashing the key however large the
// ring. MD5 positions are uniform, so a slot holds a few points on average
// (see newIndex); a slot crowded by chosen bucket names still costs only a
// binary search within it.
type index struct {
	// first[j] is the index of the first point whose top bits, read as an
	// integer, are at least j; its last entry is the number of points.
	first []int32
	shift uint // 64 minus the number of top bits read
}

// newIndex returns the index of points whose positions' high words, in
// order, are hi.
func newIndex(hi []uint64) index {
	if len(hi) == 0 {
		return index{}
	}
	// Between n/4 and n/2 slots for n points: 2^k with 2^(k+1) <= n <
	// 2^(k+2), at least 2. A slot then holds two to four points on
	// average, searched in two comparisons, and the index takes a byte a
	// point instead of four to eight.
	k := uint(max(1, bits.Len(uint(len(hi)))-2))
	x := index{first: make([]int32, 1<<k+1), shift: 64 - k}
	i := 0
	for j := range x.first {
		for i < len(hi) && hi[i]>>x.shift < uint64(j) {
			i++
		}
		x.first[j] = int32(i)
	}
	return x
}

// bounds returns the range of points [lo, hi) in which the first point at or
// after h lies, if it is not hi itself.
func (x index) bounds(h Position) (lo, hi int) {
	j := h.Hi >> x.shift
	return int(x.first[j]), int(x.first[j+1])
}
