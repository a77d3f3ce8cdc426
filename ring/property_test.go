package ring

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// trials is how many random rings each property is checked on.
const trials = 300

const nameChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

// randomName returns a name of 1 to 8 characters that is not in taken.
func randomName(rng *rand.Rand, taken []Bucket) string {
	for {
		b := make([]byte, 1+rng.IntN(8))
		for i := range b {
			b[i] = nameChars[rng.IntN(len(nameChars))]
		}
		name := string(b)
		if !slices.ContainsFunc(taken, func(x Bucket) bool { return x.Name == name }) {
			return name
		}
	}
}

func randomReplicas(rng *rand.Rand) int { return 1 + rng.IntN(200) }

// randomBuckets returns 1 to 8 buckets of 1 to 200 replicas.
func randomBuckets(rng *rand.Rand) []Bucket {
	var bs []Bucket
	for range 1 + rng.IntN(8) {
		bs = append(bs, Bucket{Name: randomName(rng, bs), Replicas: randomReplicas(rng)})
	}
	return bs
}

// forRandomRings calls check on trials random rings, each in a subtest named
// by its seed so that a failure can be replayed with -run.
func forRandomRings(t *testing.T, check func(t *testing.T, rng *rand.Rand, bs []Bucket, r *Ring)) {
	t.Helper()
	for seed := range uint64(trials) {
		rng := newRand(seed)
		bs := randomBuckets(rng)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			check(t, rng, bs, mustNew(t, bs...))
		})
	}
}

// bigInt returns the exact count of positions s stands for.
func (s span) bigInt() *big.Int {
	n := new(big.Int).SetUint64(s.carry)
	n.Lsh(n, 64).Or(n, new(big.Int).SetUint64(s.hi))
	return n.Lsh(n, 64).Or(n, new(big.Int).SetUint64(s.lo))
}

// fractionOf is n/2^128 correctly rounded, computed apart from span.fraction.
func fractionOf(n *big.Int) float64 {
	f, _ := new(big.Rat).SetFrac(n, new(big.Int).Lsh(big.NewInt(1), 128)).Float64()
	return f
}

// spanOf returns the exact number of positions the named bucket serves.
func spanOf(r *Ring, name string) *big.Int {
	i, ok := r.bucketIndex(name)
	if !ok {
		return new(big.Int)
	}
	return r.spans()[i].bigInt()
}

// checkMoves fails unless every move of ChurnBetween(a, b) and every sampled
// key whose bucket changes satisfy allowed(from, to).
func checkMoves(t *testing.T, rng *rand.Rand, a, b *Ring, allowed func(from, to string) bool) Churn {
	t.Helper()
	c := ChurnBetween(a, b)
	for _, m := range c.Moves {
		if !allowed(m.From, m.To) {
			t.Errorf("ChurnBetween has move %q->%q (share %v), which this change must not make", m.From, m.To, m.Share)
		}
	}
	for range 200 {
		key := strconv.FormatUint(rng.Uint64(), 36)
		from, _ := a.Lookup(key)
		to, _ := b.Lookup(key)
		if from != to && !allowed(from, to) {
			t.Errorf("Lookup(%q) moved %q->%q, which this change must not do", key, from, to)
		}
	}
	return c
}

func TestAddMovesUsersOnlyIntoTheNewBucket(t *testing.T) {
	forRandomRings(t, func(t *testing.T, rng *rand.Rand, bs []Bucket, r *Ring) {
		added := Bucket{Name: randomName(rng, bs), Replicas: randomReplicas(rng)}
		after, err := r.With(added)
		if err != nil {
			t.Fatal(err)
		}
		c := checkMoves(t, rng, r, after, func(_, to string) bool { return to == added.Name })
		if want := after.Shares()[added.Name]; c.Total != want {
			t.Errorf("adding %v: churn = %v, want the new bucket's share %v", added, c.Total, want)
		}
	})
}

func TestResizeMovesUsersOnlyIntoOrOutOfTheBucket(t *testing.T) {
	forRandomRings(t, func(t *testing.T, rng *rand.Rand, bs []Bucket, r *Ring) {
		old := bs[rng.IntN(len(bs))]
		resized := old
		for resized.Replicas == old.Replicas {
			resized.Replicas = randomReplicas(rng)
		}
		after, err := r.With(resized)
		if err != nil {
			t.Fatal(err)
		}
		name := old.Name
		gain := new(big.Int).Sub(spanOf(after, name), spanOf(r, name))
		var c Churn
		if resized.Replicas > old.Replicas {
			c = checkMoves(t, rng, r, after, func(_, to string) bool { return to == name })
		} else {
			c = checkMoves(t, rng, r, after, func(from, _ string) bool { return from == name })
			gain.Neg(gain)
		}
		if want := fractionOf(gain); c.Total != want {
			t.Errorf("%v -> %d replicas: churn = %v, want the change in its share %v", old, resized.Replicas, c.Total, want)
		}
	})
}

func TestRemoveMovesOnlyTheBucketsUsers(t *testing.T) {
	forRandomRings(t, func(t *testing.T, rng *rand.Rand, bs []Bucket, r *Ring) {
		gone := bs[rng.IntN(len(bs))].Name
		after := r.Without(gone)
		c := checkMoves(t, rng, r, after, func(from, _ string) bool { return from == gone })
		if want := r.Shares()[gone]; c.Total != want {
			t.Errorf("removing %q: churn = %v, want its share %v", gone, c.Total, want)
		}
	})
}

func TestSharesAddUpToTheWholeSpace(t *testing.T) {
	forRandomRings(t, func(t *testing.T, _ *rand.Rand, _ []Bucket, r *Ring) {
		var sum span
		for _, s := range r.spans() {
			sum = sum.add(s)
		}
		if want := (span{carry: 1}); sum != want {
			t.Errorf("spans add up to %v, want 2^128 %v", sum, want)
		}
	})
	empty := mustNew(t, Bucket{"A", 0})
	if got := empty.spans(); len(got) != 1 || !got[0].isZero() {
		t.Errorf("ring with no points: spans() = %v, want [0]", got)
	}
}

func TestInsertionOrderDoesNotMatter(t *testing.T) {
	forRandomRings(t, func(t *testing.T, rng *rand.Rand, bs []Bucket, r *Ring) {
		shuffled := slices.Clone(bs)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		other := mustNew(t, shuffled...)
		if diff := cmp.Diff(r.Shares(), other.Shares()); diff != "" {
			t.Errorf("Shares() differ by insertion order (-%v +%v):\n%s", bs, shuffled, diff)
		}
		for range 200 {
			key := strconv.FormatUint(rng.Uint64(), 36)
			want, _ := r.Lookup(key)
			if got, _ := other.Lookup(key); got != want {
				t.Errorf("New(%v).Lookup(%q) = %q, want %q as for New(%v)", shuffled, key, got, want, bs)
			}
		}
	})
}

// sameRing reports whether two rings hold the same state, unexported
// included: cmp.Diff over thousands of points is too slow here.
func sameRing(a, b *Ring) bool {
	return slices.Equal(a.buckets, b.buckets) && slices.Equal(a.points(), b.points()) &&
		slices.Equal(a.index.first, b.index.first) && a.index.shift == b.index.shift
}

func TestWithAndWithoutEqualAFreshNew(t *testing.T) {
	forRandomRings(t, func(t *testing.T, rng *rand.Rand, bs []Bucket, r *Ring) {
		built := &Ring{}
		for _, b := range bs {
			var err error
			if built, err = built.With(b); err != nil {
				t.Fatal(err)
			}
		}
		if !sameRing(built, r) {
			t.Errorf("With one by one gives %v, %d points; want New(%v), %d points", built.Buckets(), built.Len(), bs, r.Len())
		}

		gone := bs[rng.IntN(len(bs))]
		rest := slices.DeleteFunc(slices.Clone(bs), func(b Bucket) bool { return b == gone })
		without, want := r.Without(gone.Name), mustNew(t, rest...)
		if !sameRing(without, want) {
			t.Errorf("Without(%q) gives %v, %d points; want New(%v), %d points", gone.Name, without.Buckets(), without.Len(), rest, want.Len())
		}
		back, err := without.With(gone)
		if err != nil {
			t.Fatal(err)
		}
		if !sameRing(back, r) {
			t.Errorf("Without(%q).With(%v) differs from the ring it started from", gone.Name, gone)
		}
	})
}

func TestMovesAddUpToTotal(t *testing.T) {
	forRandomRings(t, func(t *testing.T, rng *rand.Rand, _ []Bucket, a *Ring) {
		// b is unrelated to a but may share bucket names with it.
		bs := randomBuckets(rng)
		for _, x := range a.Buckets() {
			if rng.IntN(2) == 0 && !slices.ContainsFunc(bs, func(y Bucket) bool { return y.Name == x.Name }) {
				bs = append(bs, Bucket{Name: x.Name, Replicas: randomReplicas(rng)})
			}
		}
		b := mustNew(t, bs...)
		c := ChurnBetween(a, b)
		sum := 0.0
		for i, m := range c.Moves {
			sum += m.Share
			if m.From == m.To {
				t.Errorf("move %q->%q stays in its bucket", m.From, m.To)
			}
			if i > 0 && m.Share > c.Moves[i-1].Share {
				t.Errorf("Moves not largest first: %v before %v", c.Moves[i-1], m)
			}
		}
		if math.Abs(sum-c.Total) > 1e-12 {
			t.Errorf("moves add up to %v, want Total %v", sum, c.Total)
		}

		if self := ChurnBetween(a, a); self.Total != 0 || len(self.Moves) != 0 {
			t.Errorf("ChurnBetween(a, a) = %+v, want zero", self)
		}
	})
}

func TestChurnFromAndToAnEmptyRing(t *testing.T) {
	if c := ChurnBetween(&Ring{}, &Ring{}); c.Total != 0 || len(c.Moves) != 0 {
		t.Errorf("empty to empty: %+v, want zero", c)
	}
	forRandomRings(t, func(t *testing.T, _ *rand.Rand, _ []Bucket, r *Ring) {
		shares := r.Shares()
		for _, tt := range []struct {
			name       string
			from, to   *Ring
			emptySide  func(Move) string
			bucketSide func(Move) string
		}{
			{"from empty", &Ring{}, r, func(m Move) string { return m.From }, func(m Move) string { return m.To }},
			{"to empty", r, &Ring{}, func(m Move) string { return m.To }, func(m Move) string { return m.From }},
		} {
			c := ChurnBetween(tt.from, tt.to)
			if c.Total != 1 {
				t.Errorf("%s: Total = %v, want 1", tt.name, c.Total)
			}
			if len(c.Moves) != len(shares) {
				t.Errorf("%s: %d moves, want one per bucket (%d)", tt.name, len(c.Moves), len(shares))
			}
			for _, m := range c.Moves {
				if tt.emptySide(m) != "" {
					t.Errorf("%s: move %q->%q, want the empty ring's side \"\"", tt.name, m.From, m.To)
				}
				if want := shares[tt.bucketSide(m)]; m.Share != want {
					t.Errorf("%s: move %q->%q has share %v, want the bucket's share %v", tt.name, m.From, m.To, m.Share, want)
				}
			}
		}
	})
}

// TestChurnAgreesWithCounting counts a million users on both sides of a
// change and compares the fraction that moved with the exact churn.
func TestChurnAgreesWithCounting(t *testing.T) {
	if testing.Short() {
		t.Skip("counts a million keys per case")
	}
	rng := newRand(42)
	random := mustNew(t, randomBuckets(rng)...)
	randomAfter := random.Without(random.Buckets()[0].Name)
	randomAfter, err := randomAfter.With(Bucket{Name: randomName(rng, random.Buckets()), Replicas: randomReplicas(rng)})
	if err != nil {
		t.Fatal(err)
	}
	seedAfter, err := abc(t).With(Bucket{"D", 3})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name          string
		before, after *Ring
	}{
		{"seed add D", abc(t), seedAfter},
		{"random remove one add one", random, randomAfter},
	}
	const keys = 1_000_000
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			moved := 0
			buf := make([]byte, 0, 32)
			for i := range keys {
				h := HashBytes(strconv.AppendInt(append(buf[:0], "user:"...), int64(i), 10))
				from, _ := tt.before.LookupPosition(h)
				to, _ := tt.after.LookupPosition(h)
				if from != to {
					moved++
				}
			}
			counted := float64(moved) / keys
			exact := ChurnBetween(tt.before, tt.after).Total
			if math.Abs(counted-exact) > 0.002 {
				t.Errorf("counted churn %.4f%%, exact %.4f%%: more than 0.2 points apart", 100*counted, 100*exact)
			}
		})
	}
}

func TestModuloChurnSeedExample(t *testing.T) {
	after, err := abc(t).With(Bucket{"D", 3})
	if err != nil {
		t.Fatal(err)
	}
	if got := ModuloChurn(abc(t), after); got != 0.75 {
		t.Errorf("ModuloChurn(A,B,C -> A,B,C,D) = %v, want 0.75", got)
	}
	if got := ModuloChurn(&Ring{}, &Ring{}); got != 0 {
		t.Errorf("ModuloChurn(empty, empty) = %v, want 0", got)
	}
	if got := ModuloChurn(&Ring{}, after); got != 1 {
		t.Errorf("ModuloChurn(empty, A,B,C,D) = %v, want 1", got)
	}
}

// TestModuloChurnAgreesWithCounting counts the moving residues over one
// period lcm(N, M) of naive modulo assignment.
func TestModuloChurnAgreesWithCounting(t *testing.T) {
	for seed := range uint64(trials) {
		rng := newRand(seed)
		var before []Bucket
		for range 1 + rng.IntN(12) {
			before = append(before, Bucket{Name: randomName(rng, before), Replicas: randomReplicas(rng)})
		}
		// Remove some, then add some, ending with 1 to 12 buckets.
		after := slices.Clone(before)
		for range rng.IntN(len(after)) {
			i := rng.IntN(len(after))
			after = slices.Delete(after, i, i+1)
		}
		for range rng.IntN(13 - len(after)) {
			after = append(after, Bucket{Name: randomName(rng, slices.Concat(before, after)), Replicas: randomReplicas(rng)})
		}

		an, bn := names(mustNew(t, before...)), names(mustNew(t, after...))
		n, m := len(an), len(bn)
		period := n / gcd(n, m) * m
		moved := 0
		for h := range period {
			if an[h%n] != bn[h%m] {
				moved++
			}
		}
		want := float64(moved) / float64(period)
		if got := ModuloChurn(mustNew(t, before...), mustNew(t, after...)); got != want {
			t.Errorf("seed %d: ModuloChurn(%v -> %v) = %v, want %d/%d = %v", seed, an, bn, got, moved, period, want)
		}
	}
}

// TestNilRingIsAnEmptyRing: every method accepts a nil *Ring as the empty
// ring, as the zero value is.
func TestNilRingIsAnEmptyRing(t *testing.T) {
	var r *Ring
	if n := r.Len(); n != 0 {
		t.Errorf("Len() = %d, want 0", n)
	}
	if got, ok := r.Lookup("user1"); ok {
		t.Errorf("Lookup(user1) = %q, true; want no owner", got)
	}
	if got := r.Shares(); len(got) != 0 {
		t.Errorf("Shares() = %v, want empty", got)
	}
	if got := r.Without("A"); got != nil {
		t.Errorf("Without(A) = %v, want the nil ring itself", got.Buckets())
	}
	abc := abc(t)
	if c := ChurnBetween(r, abc); c.Total != 1 {
		t.Errorf("ChurnBetween(nil, A,B,C).Total = %v, want 1", c.Total)
	}
	if got := ModuloChurn(r, abc); got != 1 {
		t.Errorf("ModuloChurn(nil, A,B,C) = %v, want 1", got)
	}
	grown, err := r.With(Bucket{"A", 3})
	if err != nil || !sameRing(grown, mustNew(t, Bucket{"A", 3})) {
		t.Errorf("With(A×3) = %v, %v; want New(A×3)", grown.Buckets(), err)
	}
}

// TestNewRefusesReplicasThatOverflow: the point count must not wrap round to
// a negative number and reach make as a capacity.
func TestNewRefusesReplicasThatOverflow(t *testing.T) {
	for _, bs := range [][]Bucket{
		{{"a", 1}, {"b", math.MaxInt}},
		{{"a", math.MaxInt}, {"b", math.MaxInt}},
		{{"a", MaxPoints}, {"b", math.MaxInt - MaxPoints + 1}},
	} {
		if _, err := New(bs...); !errors.Is(err, ErrTooManyPoints) {
			t.Errorf("New(%v) error = %v, want %v", bs, err, ErrTooManyPoints)
		}
	}
	if _, err := New(Bucket{"a", MaxPoints - 1}, Bucket{"b", 1}); err != nil {
		t.Errorf("New with exactly MaxPoints points: %v", err)
	}
}

// TestLookupPositionAtTheEdges looks up the positions on and beside every
// point, and the two ends of the hash space, against a scan of all points.
func TestLookupPositionAtTheEdges(t *testing.T) {
	forRandomRings(t, func(t *testing.T, _ *rand.Rand, _ []Bucket, r *Ring) {
		points := r.points() // a copy: taken once, not per position looked up
		at := []Position{{}, {Hi: math.MaxUint64, Lo: math.MaxUint64}, {Hi: 1 << 63}}
		for _, p := range points {
			lo, borrow := bits.Sub64(p.pos.Lo, 1, 0)
			below := Position{Hi: p.pos.Hi - borrow, Lo: lo}
			lo, carry := bits.Add64(p.pos.Lo, 1, 0)
			above := Position{Hi: p.pos.Hi + carry, Lo: lo}
			at = append(at, below, p.pos, above)
		}
		for _, h := range at {
			i := max(0, slices.IndexFunc(points, func(p point) bool { return p.pos.Compare(h) >= 0 }))
			want := r.buckets[points[i].bucket].Name
			if got, _ := r.LookupPosition(h); got != want {
				t.Errorf("LookupPosition(%x) = %q, want %q", h.big(), got, want)
			}
		}
	})
}
