package client_test

import (
	"testing"
	"time"

	"github.com/rollout/rollout/api/client"
)

// TestRetryDelay: the delay before a retry lies in the upper half of the
// base doubled per failure in a row, capped, and is spread by the random
// source across that half.
func TestRetryDelay(t *testing.T) {
	const base, ceiling = 100 * time.Millisecond, 30 * time.Second
	low := func() float64 { return 0 }
	high := func() float64 { return 0.9999999 }
	prev := time.Duration(0)
	for failures := range 100 {
		window := ceiling
		if failures < 20 && base<<failures < ceiling {
			window = base << failures
		}
		lo, hi := client.RetryDelay(failures, base, ceiling, low), client.RetryDelay(failures, base, ceiling, high)
		if lo != window/2 || hi < window*99/100 || hi > window {
			t.Errorf("RetryDelay(%d) spans [%v, %v], want [%v, %v]", failures, lo, hi, window/2, window)
		}
		if lo < prev {
			t.Errorf("RetryDelay(%d) = %v, less than after fewer failures (%v)", failures, lo, prev)
		}
		prev = lo
	}
	if got := client.RetryDelay(0, base, ceiling, func() float64 { return 0.5 }); got != 75*time.Millisecond {
		t.Errorf("RetryDelay(0) at 0.5 = %v, want 75ms", got)
	}
	// A base so long that doubling it overflows stays at the cap.
	for failures := range 70 {
		if got := client.RetryDelay(failures, 1000*time.Hour, 2000*time.Hour, high); got < 500*time.Hour || got > 2000*time.Hour {
			t.Errorf("RetryDelay(%d) with a base of 1000 h = %v, want within [500 h, 2000 h]", failures, got)
		}
	}
}
