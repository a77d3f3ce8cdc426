package api_test

import (
	"sync"
	"testing"
)

// TestConcurrentWritersIfMatch: writers that all read version N and change
// the feature with If-Match N: exactly one wins each round, the others get
// 412, and the history stays contiguous.
func TestConcurrentWritersIfMatch(t *testing.T) {
	s := startServer(t)
	s.must(201, "POST", "/api/features", abcFeature("f"))
	const rounds, writers = 5, 8
	for round := range rounds {
		tag := s.etag("f") // what every writer of the round read
		var wg sync.WaitGroup
		statuses := make([]int, writers)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := s.do("PUT", "/api/features/f/buckets/A", map[string]any{"replicas": 10 + round*writers + w},
					"If-Match", tag)
				statuses[w] = r.status
			}()
		}
		wg.Wait()
		checkOneWinner(t, round, statuses)
	}
	vs := s.must(200, "GET", "/api/features/f/versions", nil)["versions"].([]any)
	if len(vs) != rounds+1 {
		t.Fatalf("%d versions, want %d", len(vs), rounds+1)
	}
	for i, v := range vs {
		if got := v.(map[string]any)["version"]; got != float64(rounds+1-i) {
			t.Errorf("versions[%d] = %v, want %d: history must be contiguous", i, got, rounds+1-i)
		}
	}
}

// checkOneWinner fails the test unless exactly one of a round's writers,
// who all sent the same If-Match, got 200 and every other got 412.
func checkOneWinner(t *testing.T, round int, statuses []int) {
	t.Helper()
	won := 0
	for _, st := range statuses {
		switch st {
		case 200:
			won++
		case 412:
		default:
			t.Errorf("round %d: a writer got %d, want 200 or 412", round, st)
		}
	}
	if won != 1 {
		t.Fatalf("round %d: %d writers won (%v), want exactly 1", round, won, statuses)
	}
}
