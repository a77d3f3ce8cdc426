package readmostly_test

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rollout/rollout/api/internal/readmostly"
)

// counted returns a Map whose values are the key's text and the number of
// its creation, and the count of values created.
func counted() (*readmostly.Map[int, string], *atomic.Int64) {
	var made atomic.Int64
	return readmostly.New(func(k int) string {
		return strconv.Itoa(k) + "#" + strconv.FormatInt(made.Add(1), 10)
	}), &made
}

// TestGetCreatesOnce: each key's value is made once, whether it is read
// from the read map or the locked one, and kept across many more keys.
func TestGetCreatesOnce(t *testing.T) {
	m, made := counted()
	first := map[int]string{}
	for round := range 3 {
		for k := range 100 {
			v := m.Get(k)
			if round == 0 {
				first[k] = v
			} else if v != first[k] {
				t.Fatalf("round %d: Get(%d) = %q, want %q as first made", round, k, v, first[k])
			}
		}
	}
	if got := made.Load(); got != 100 {
		t.Errorf("values made = %d, want 100 (one per key)", got)
	}
}

// TestDeleteIf: the keys deleted are made again on their next Get; the
// others keep their value.
func TestDeleteIf(t *testing.T) {
	m, made := counted()
	before := map[int]string{}
	for k := range 10 {
		before[k] = m.Get(k)
	}
	m.DeleteIf(func(k int) bool { return k%2 == 0 })
	for k := range 10 {
		got := m.Get(k)
		if k%2 == 0 && got == before[k] {
			t.Errorf("Get(%d) after its deletion = %q, the deleted value", k, got)
		}
		if k%2 == 1 && got != before[k] {
			t.Errorf("Get(%d), not deleted, = %q, want %q", k, got, before[k])
		}
	}
	if got := made.Load(); got != 15 {
		t.Errorf("values made = %d, want 15 (10, then the 5 deleted again)", got)
	}
}

// TestConcurrentGet: goroutines getting the same keys at once all see one
// value per key (run with -race).
func TestConcurrentGet(t *testing.T) {
	m, made := counted()
	const goroutines, keys = 8, 200
	got := make([][]string, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			got[g] = make([]string, keys)
			for k := range keys {
				got[g][k] = m.Get(k)
			}
			m.DeleteIf(func(k int) bool { return k >= keys })
		})
	}
	wg.Wait()
	for g := range goroutines {
		for k := range keys {
			if got[g][k] != got[0][k] {
				t.Fatalf("goroutine %d: Get(%d) = %q, goroutine 0 got %q", g, k, got[g][k], got[0][k])
			}
		}
	}
	if n := made.Load(); n != keys {
		t.Errorf("values made = %d, want %d", n, keys)
	}
}
