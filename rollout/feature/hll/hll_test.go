package hll

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
)

// fill returns a sketch of n distinct users of the trial seed.
func fill(seed, n int) *Sketch {
	s := new(Sketch)
	for i := range n {
		s.Insert(Hash(fmt.Sprintf("user-%d-%d", seed, i)))
	}
	return s
}

// TestEstimateError measures the estimate's error against exact counts:
// the root mean square relative error over trials stays within twice
// RelativeError at every cardinality (three times over 3 trials of a
// million), and small counts are within a user or two.
// The figures are in docs/api.md (distinct users).
func TestEstimateError(t *testing.T) {
	for _, c := range []struct {
		n, trials int
		rms       float64
	}{
		{10, 20, 0.05}, {100, 20, 0.02}, {1_000, 20, 0.02}, {10_000, 20, 2 * RelativeError},
		{100_000, 10, 2 * RelativeError}, {1_000_000, 3, 3 * RelativeError},
	} {
		var sq float64
		for trial := range c.trials {
			got := float64(fill(trial, c.n).Count())
			rel := (got - float64(c.n)) / float64(c.n)
			sq += rel * rel
		}
		rms := math.Sqrt(sq / float64(c.trials))
		t.Logf("n=%d: RMS relative error %.4f over %d trials", c.n, rms, c.trials)
		if rms > c.rms {
			t.Errorf("n=%d: RMS relative error %.4f, want at most %.4f", c.n, rms, c.rms)
		}
	}
}

func TestEmptyAndRepeats(t *testing.T) {
	s := new(Sketch)
	if got := s.Count(); got != 0 || !s.Empty() {
		t.Fatalf("empty sketch: Count() = %d, Empty() = %v, want 0, true", got, s.Empty())
	}
	for range 1000 {
		s.Insert(Hash("same user"))
	}
	if got := s.Count(); got != 1 {
		t.Errorf("one user inserted 1000 times: Count() = %d, want 1", got)
	}
	s.Reset()
	if !s.Empty() {
		t.Errorf("Reset left registers")
	}
}

// TestMergeIsUnion: the merge of two sketches is the sketch of the union
// of their users, and merging again changes nothing.
func TestMergeIsUnion(t *testing.T) {
	a, b, both := new(Sketch), new(Sketch), new(Sketch)
	for i := range 30_000 {
		h := Hash(fmt.Sprint("u", i))
		if i < 20_000 {
			a.Insert(h)
		}
		if i >= 10_000 {
			b.Insert(h)
		}
		both.Insert(h)
	}
	a.Merge(b)
	once := a.Append(nil)
	a.Merge(b)
	if !bytes.Equal(a.Append(nil), once) || !bytes.Equal(once, both.Append(nil)) {
		t.Fatalf("merge of two sketches differs from the sketch of the union (or changed when merged twice)")
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	for _, n := range []int{0, 5, 500, 50_000} {
		s := fill(1, n)
		data, _ := s.MarshalBinary()
		if len(data) > MaxEncodedSize {
			t.Errorf("n=%d: %d bytes, above MaxEncodedSize %d", n, len(data), MaxEncodedSize)
		}
		if n <= 500 && data[2] != sparseForm || n == 50_000 && data[2] != denseForm {
			t.Errorf("n=%d: form %q", n, data[2])
		}
		var back Sketch
		if err := back.UnmarshalBinary(data); err != nil {
			t.Fatalf("n=%d: UnmarshalBinary: %v", n, err)
		}
		if !bytes.Equal(back.Append(nil), data) {
			t.Errorf("n=%d: round trip changed the sketch", n)
		}
	}
}

func TestUnmarshalRefusesMalformed(t *testing.T) {
	dense := fill(2, 50_000).Append(nil)
	bad := map[string][]byte{
		"empty":           nil,
		"other format":    {2, Precision, sparseForm},
		"other precision": {formatVersion, 14, sparseForm},
		"unknown form":    {formatVersion, Precision, 'x'},
		"short dense":     dense[:100],
		"rank too high":   {formatVersion, Precision, sparseForm, 0, 1, maxRank + 1},
		"zero rank":       {formatVersion, Precision, sparseForm, 0, 1, 0},
		"index too high":  {formatVersion, Precision, sparseForm, 0x10, 0, 1},
		"out of order":    {formatVersion, Precision, sparseForm, 0, 2, 1, 0, 1, 1},
		"repeated":        {formatVersion, Precision, sparseForm, 0, 2, 1, 0, 2, 1},
		"ragged":          {formatVersion, Precision, sparseForm, 0, 2},
	}
	for name, data := range bad {
		s := fill(3, 10)
		before := s.Append(nil)
		err := s.UnmarshalBinary(data)
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: UnmarshalBinary = %v, want ErrMalformed", name, err)
		}
		if !bytes.Equal(s.Append(nil), before) {
			t.Errorf("%s: a refused sketch changed the one it was merged into", name)
		}
	}
}

// TestConcurrentInserts: users inserted from many goroutines at once are
// all counted, as if inserted from one (run with -race).
func TestConcurrentInserts(t *testing.T) {
	var s Sketch
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := g; i < 40_000; i += 8 {
				s.Insert(Hash(fmt.Sprint("c", i)))
			}
		})
	}
	wg.Wait()
	one := new(Sketch)
	for i := range 40_000 {
		one.Insert(Hash(fmt.Sprint("c", i)))
	}
	if !bytes.Equal(s.Append(nil), one.Append(nil)) {
		t.Errorf("concurrent inserts differ from the same inserts made by one goroutine")
	}
}

func TestInsertDoesNotAllocate(t *testing.T) {
	var s Sketch
	users := []string{"a", "bb", "user-1234@example.com"}
	i := 0
	if n := testing.AllocsPerRun(1000, func() { s.Insert(Hash(users[i%3])); i++ }); n != 0 {
		t.Errorf("Insert(Hash(user)) allocates %v times, want 0", n)
	}
}

func FuzzUnmarshal(f *testing.F) {
	f.Add(fill(4, 20).Append(nil))
	f.Add(fill(4, 20_000).Append(nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s Sketch
		if err := s.UnmarshalBinary(data); err != nil {
			return
		}
		var back Sketch
		if err := back.UnmarshalBinary(s.Append(nil)); err != nil {
			t.Fatalf("a sketch read without error does not read back: %v", err)
		}
		if e := s.Estimate(); math.IsNaN(e) || e < 0 {
			t.Fatalf("Estimate() = %v", e)
		}
	})
}

func BenchmarkInsert(b *testing.B) {
	var s Sketch
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s.Insert(Hash("user-1234@example.com"))
	}
}
