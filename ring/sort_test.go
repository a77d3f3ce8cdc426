package ring

import (
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// TestSortPoints: the bin sort of New orders points as a comparison sort
// by (position, bucket) does, ties of position and crowded bins included,
// with bucket indexes kept in a byte or in an int32.
func TestSortPoints(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 2, 3, 17, 1000, 20_000} {
		points := make([]point, n)
		for i := range points {
			points[i] = point{pos: Position{Hi: rng.Uint64(), Lo: rng.Uint64()}, bucket: int32(rng.IntN(8))}
			switch {
			case i > 0 && i%7 == 0: // the same position, another bucket
				points[i].pos, points[i].bucket = points[i-1].pos, (points[i-1].bucket+1)%8
			case i > 0 && i%5 == 0: // the same leading bits: a crowded bin
				points[i].pos.Hi = points[i-1].pos.Hi ^ uint64(rng.IntN(1<<16))
			}
		}
		want := slices.Clone(points)
		slices.SortFunc(want, func(a, b point) int {
			if c := a.pos.Compare(b.pos); c != 0 {
				return c
			}
			return int(a.bucket) - int(b.bucket)
		})
		for _, buckets := range []int{8, 300} { // bucket indexes in a byte, or not
			r := &Ring{pts: new(scratch).sortPoints(points, buckets)}
			if !slices.Equal(r.points(), want) {
				t.Errorf("%d points of %d buckets: the bin sort differs from the comparison sort", n, buckets)
			}
		}
	}
}

// TestNewHashedIsNew: a ring built from positions hashed by AppendPoints,
// extra positions included, is the ring New builds; too few positions are
// refused.
func TestNewHashedIsNew(t *testing.T) {
	forRandomRings(t, func(t *testing.T, rng *rand.Rand, bs []Bucket, r *Ring) {
		positions := make([][]Position, len(bs))
		for i, b := range bs {
			positions[i] = AppendPoints(nil, b.Name, 0, b.Replicas+rng.IntN(3)) // extra ones are not read
		}
		got, err := NewHashed(bs, positions)
		if err != nil || !sameRing(got, r) {
			t.Fatalf("NewHashed(%v) = %v, %v; want New's ring", bs, got.Buckets(), err)
		}
		for i, b := range bs {
			if b.Replicas > 0 {
				short := slices.Clone(positions)
				short[i] = short[i][:b.Replicas-1]
				if _, err := NewHashed(bs, short); !errors.Is(err, ErrPositions) {
					t.Errorf("NewHashed with %d positions for %d replicas: %v, want ErrPositions", b.Replicas-1, b.Replicas, err)
				}
				break
			}
		}
	})
}

// TestNewConcurrent: rings built at once by several goroutines, sharing
// New's pooled buffers, are the rings built one after another.
func TestNewConcurrent(t *testing.T) {
	var want []*Ring
	var bss [][]Bucket
	for i := range 8 {
		bs := []Bucket{{Name: "a", Replicas: 100 + 37*i}, {Name: "b", Replicas: 2000 - 90*i}}
		r, err := New(bs...)
		if err != nil {
			t.Fatal(err)
		}
		want, bss = append(want, r), append(bss, bs)
	}
	var wg sync.WaitGroup
	got := make([]*Ring, len(bss))
	for i, bs := range bss {
		wg.Go(func() {
			for range 20 {
				got[i], _ = New(bs...)
			}
		})
	}
	wg.Wait()
	for i := range want {
		if !sameRing(got[i], want[i]) {
			t.Errorf("ring %d built concurrently differs from the one built alone", i)
		}
	}
}
