package ring

import (
	"crypto/md5"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
)

// The fuzz tests compare the ring with a naive model written from the
// package comment alone: a list of points with big.Int positions, scanned in
// full for every question. It is slow and obviously right.

var twoTo128 = new(big.Int).Lsh(big.NewInt(1), 128)

type naivePoint struct {
	pos  *big.Int
	name string
}

type naiveRing []naivePoint

func naiveHash(s string) *big.Int {
	d := md5.Sum([]byte(s))
	return new(big.Int).SetBytes(d[:])
}

func newNaiveRing(buckets []Bucket) naiveRing {
	var n naiveRing
	for _, b := range buckets {
		for r := range b.Replicas {
			n = append(n, naivePoint{pos: naiveHash(fmt.Sprintf("%s#%d", b.Name, r)), name: b.Name})
		}
	}
	return n
}

// before orders points by position, then by bucket name.
func (p naivePoint) before(q naivePoint) bool {
	c := p.pos.Cmp(q.pos)
	return c < 0 || c == 0 && p.name < q.name
}

// lookup returns the owner of the first point at or after h, or else of the
// first point of all.
func (n naiveRing) lookup(h *big.Int) (string, bool) {
	var next, first *naivePoint
	for i := range n {
		p := &n[i]
		if first == nil || p.before(*first) {
			first = p
		}
		if p.pos.Cmp(h) >= 0 && (next == nil || p.before(*next)) {
			next = p
		}
	}
	switch {
	case next != nil:
		return next.name, true
	case first != nil:
		return first.name, true
	}
	return "", false
}

// naiveArc is a stretch of the hash space, (after the previous cut, upto],
// with its owner in each of the rings it was cut from.
type naiveArc struct {
	upto   *big.Int
	size   *big.Int
	owners []string
}

// naiveArcs cuts the hash space at every point of the rings.
func naiveArcs(rings ...naiveRing) []naiveArc {
	var cuts []*big.Int
	for _, r := range rings {
		for _, p := range r {
			cuts = append(cuts, p.pos)
		}
	}
	slices.SortFunc(cuts, (*big.Int).Cmp)
	cuts = slices.CompactFunc(cuts, func(x, y *big.Int) bool { return x.Cmp(y) == 0 })

	arcs := make([]naiveArc, len(cuts))
	for k, c := range cuts {
		size := new(big.Int)
		if k == 0 {
			size.Sub(twoTo128, cuts[len(cuts)-1]).Add(size, c)
		} else {
			size.Sub(c, cuts[k-1])
		}
		arcs[k] = naiveArc{upto: c, size: size}
		for _, r := range rings {
			owner, _ := r.lookup(c)
			arcs[k].owners = append(arcs[k].owners, owner)
		}
	}
	return arcs
}

// positionOf converts a big.Int in [0, 2^128) to a Position.
func positionOf(n *big.Int) Position {
	var b [16]byte
	new(big.Int).Mod(n, twoTo128).FillBytes(b[:])
	return Position{Hi: binary.BigEndian.Uint64(b[:8]), Lo: binary.BigEndian.Uint64(b[8:])}
}

// decodeBuckets reads up to 8 buckets from data, each a length byte n (mod
// 9), n bytes of name and a replicas byte (mod 32). Names may be empty,
// contain '#' or repeat: New must refuse those.
func decodeBuckets(data []byte) []Bucket {
	var bs []Bucket
	for len(data) > 0 && len(bs) < 8 {
		n := int(data[0]) % 9
		data = data[1:]
		if len(data) < n+1 {
			break
		}
		bs = append(bs, Bucket{Name: string(data[:n]), Replicas: int(data[n]) % 32})
		data = data[n+1:]
	}
	return bs
}

// naiveRefuses returns the error New must return for bs, or nil.
func naiveRefuses(bs []Bucket) error {
	seen := map[string]bool{}
	for _, b := range bs {
		switch {
		case b.Name == "":
			return ErrEmptyName
		case strings.Contains(b.Name, "#"):
			return ErrNameHasHash
		}
		seen[b.Name] = true
	}
	if len(seen) < len(bs) {
		return ErrDuplicate
	}
	return nil
}

// newOrRefused builds the ring of bs, or returns nil after checking that New
// refused bs for a reason the model agrees with.
func newOrRefused(t *testing.T, bs []Bucket) *Ring {
	t.Helper()
	r, err := New(bs...)
	want := naiveRefuses(bs)
	switch {
	case want == nil && err != nil:
		t.Fatalf("New(%s) error = %v, want none", quoted(bs), err)
	case want != nil && err == nil:
		t.Fatalf("New(%s) accepted, want error %v", quoted(bs), want)
	case want != nil && !errors.Is(err, ErrEmptyName) && !errors.Is(err, ErrNameHasHash) && !errors.Is(err, ErrDuplicate):
		// Several faults may be present; any of them will do.
		t.Fatalf("New(%s) error = %v, want %v", quoted(bs), err, want)
	}
	return r
}

func FuzzLookup(f *testing.F) {
	f.Fuzz(func(t *testing.T, spec []byte, key string) {
		bs := decodeBuckets(spec)
		r := newOrRefused(t, bs)
		if r == nil {
			return
		}
		model := newNaiveRing(bs)

		h := naiveHash(key)
		if got := Hash(key).big(); got.Cmp(h) != 0 {
			t.Fatalf("Hash(%q) = %x, want %x", key, got, h)
		}
		want, wantOK := model.lookup(h)
		if got, ok := r.Lookup(key); got != want || ok != wantOK {
			t.Errorf("Lookup(%q) = %q, %v; want %q, %v", key, got, ok, want, wantOK)
		}

		// On a point, and just either side of it, for the first few points.
		one := big.NewInt(1)
		for _, p := range model[:min(len(model), 8)] {
			for _, at := range []*big.Int{new(big.Int).Sub(p.pos, one), p.pos, new(big.Int).Add(p.pos, one)} {
				pos := positionOf(at)
				want, _ := model.lookup(pos.big())
				if got, _ := r.LookupPosition(pos); got != want {
					t.Errorf("LookupPosition(%x) = %q, want %q", pos.big(), got, want)
				}
			}
		}

		sums := map[string]*big.Int{}
		for _, b := range bs {
			sums[b.Name] = new(big.Int)
		}
		whole := new(big.Int)
		for _, a := range naiveArcs(model) {
			sums[a.owners[0]].Add(sums[a.owners[0]], a.size)
			whole.Add(whole, a.size)
		}
		if len(model) > 0 && whole.Cmp(twoTo128) != 0 {
			t.Fatalf("model arcs add up to %x, want 2^128", whole)
		}
		shares := r.Shares()
		if len(shares) != len(bs) {
			t.Errorf("Shares() = %v, want one share per bucket of %s", shares, quoted(bs))
		}
		for name, n := range sums {
			if got, want := shares[name], fractionOf(n); got != want {
				t.Errorf("Shares()[%q] = %v, want %v", name, got, want)
			}
		}
	})
}

// applyEdits changes r, and the bucket list it was built from, by up to 8
// edits read three bytes at a time (op, i, v): remove bucket i, set its
// replicas to v (mod 32), or add (or resize) a one-letter bucket. The bound
// keeps each input fast, and so the fuzzer's rate of executions high.
func applyEdits(t *testing.T, r *Ring, bs []Bucket, edits []byte) (*Ring, []Bucket) {
	t.Helper()
	bs = slices.Clone(bs)
	edits = edits[:min(len(edits), 8*3)]
	for ; len(edits) >= 3; edits = edits[3:] {
		op, i, v := edits[0]%3, int(edits[1]), int(edits[2])%32
		var b Bucket
		switch {
		case op == 0 && len(bs) > 0:
			gone := bs[i%len(bs)].Name
			r = r.Without(gone)
			bs = slices.DeleteFunc(bs, func(x Bucket) bool { return x.Name == gone })
			continue
		case op == 1 && len(bs) > 0:
			b = Bucket{Name: bs[i%len(bs)].Name, Replicas: v}
		case op == 2:
			b = Bucket{Name: nameChars[i%len(nameChars) : i%len(nameChars)+1], Replicas: v}
		default:
			continue
		}
		var err error
		if r, err = r.With(b); err != nil {
			t.Fatalf("With(%v): %v", b, err)
		}
		if j := slices.IndexFunc(bs, func(x Bucket) bool { return x.Name == b.Name }); j >= 0 {
			bs[j] = b
		} else {
			bs = append(bs, b)
		}
	}
	return r, bs
}

func FuzzChurn(f *testing.F) {
	f.Fuzz(func(t *testing.T, spec, edits []byte) {
		before := decodeBuckets(spec)
		a := newOrRefused(t, before)
		if a == nil {
			return
		}
		b, after := applyEdits(t, a, before, edits)

		type pair struct{ from, to string }
		want := map[pair]*big.Int{}
		total := new(big.Int)
		for _, arc := range naiveArcs(newNaiveRing(before), newNaiveRing(after)) {
			if from, to := arc.owners[0], arc.owners[1]; from != to {
				k := pair{from, to}
				if want[k] == nil {
					want[k] = new(big.Int)
				}
				want[k].Add(want[k], arc.size)
				total.Add(total, arc.size)
			}
		}

		c := ChurnBetween(a, b)
		if got, want := c.Total, fractionOf(total); got != want {
			t.Errorf("ChurnBetween(%s -> %s).Total = %v, want %v", quoted(before), quoted(after), got, want)
		}
		if len(c.Moves) != len(want) {
			t.Errorf("ChurnBetween(%s -> %s) has %d moves, want %d", quoted(before), quoted(after), len(c.Moves), len(want))
		}
		for _, m := range c.Moves {
			n, ok := want[pair{m.From, m.To}]
			if !ok {
				t.Errorf("move %q->%q (share %v), want no such move", m.From, m.To, m.Share)
				continue
			}
			if got, want := m.Share, fractionOf(n); got != want {
				t.Errorf("move %q->%q share = %v, want %v", m.From, m.To, got, want)
			}
		}

		// Naive modulo assignment, counted over one period.
		an, bn := namesWithPoints(before), namesWithPoints(after)
		wantModulo := 0.0
		switch n, m := len(an), len(bn); {
		case n == 0 && m == 0:
		case n == 0 || m == 0:
			wantModulo = 1
		default:
			period, moved := n/gcd(n, m)*m, 0
			for h := range period {
				if an[h%n] != bn[h%m] {
					moved++
				}
			}
			wantModulo = float64(moved) / float64(period)
		}
		if got := ModuloChurn(a, b); got != wantModulo {
			t.Errorf("ModuloChurn(%s -> %s) = %v, want %v", quoted(before), quoted(after), got, wantModulo)
		}
	})
}

// namesWithPoints returns the sorted names of the buckets with replicas.
func namesWithPoints(bs []Bucket) []string {
	var out []string
	for _, b := range bs {
		if b.Replicas > 0 {
			out = append(out, b.Name)
		}
	}
	slices.Sort(out)
	return out
}

// quoted formats buckets whose names may hold any bytes.
func quoted(bs []Bucket) string {
	parts := make([]string, len(bs))
	for i, b := range bs {
		parts[i] = fmt.Sprintf("%q×%d", b.Name, b.Replicas)
	}
	return "[" + strings.Join(parts, " ") + "]"
}
