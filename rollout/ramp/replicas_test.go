package ramp_test

import (
	"math"
	"testing"

	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/plan"
	"github.com/rollout/rollout/rollout/ramp"
)

// TestReplicasBruteForce: the replicas a step chooses are the smallest
// count at or above the bucket's whose exact share reaches the target, or
// the one just below when that is closer and within tolerance; checked
// against a scan of every count.
func TestReplicasBruteForce(t *testing.T) {
	for _, tc := range []struct {
		on, off int
		target  float64
	}{{1, 50, 0.05}, {1, 50, 0.3}, {3, 3, 0.7}, {10, 200, 0.1}, {40, 200, 0.25}, {2, 100, 0.5}, {1, 9, 0.9}} {
		f := feature.Feature{Key: "f", Buckets: []feature.Bucket{{Name: "on", Replicas: tc.on}, {Name: "off", Replicas: tc.off}}}
		n, share, err := ramp.Replicas(f, "on", tc.target, plan.DefaultTolerance, false)
		if err != nil {
			t.Errorf("ramp.Replicas(on %d, off %d, %v) = %v", tc.on, tc.off, tc.target, err)
			continue
		}
		first := 0 // smallest count reaching the target
		for k := tc.on; k <= feature.MaxReplicas && first == 0; k++ {
			if plan.RingShares(map[string]int{"on": k, "off": tc.off})["on"] >= tc.target {
				first = k
			}
		}
		want := first
		over := plan.RingShares(map[string]int{"on": first, "off": tc.off})["on"] - tc.target
		if first > tc.on {
			under := tc.target - plan.RingShares(map[string]int{"on": first - 1, "off": tc.off})["on"]
			if under < over && (under <= plan.DefaultTolerance || over > plan.DefaultTolerance) {
				want = first - 1
			}
		}
		if n != want {
			t.Errorf("ramp.Replicas(on %d, off %d, %v) = %d (share %.4f), want %d", tc.on, tc.off, tc.target, n, share, want)
		}
		if got := plan.RingShares(map[string]int{"on": n, "off": tc.off})["on"]; math.Abs(got-share) > 1e-15 {
			t.Errorf("ramp.Replicas(...) share %v, the ring says %v", share, got)
		}
	}
}
