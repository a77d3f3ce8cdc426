package rollout_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/stats"
)

// TestExposuresSRM: the exposure report checks the current version's
// counts and every version's against the shares each served.
func TestExposuresSRM(t *testing.T) {
	ctx := context.Background()
	svc, _ := newService(t)
	mustCreate(t, svc, feature.Feature{Key: "f", Enabled: true, Salt: "f", Buckets: []feature.Bucket{{Name: "off", Replicas: 2000}, {Name: "on", Replicas: 1980}}})
	evaluate := func(from, to int) {
		snap := svc.Snapshot()
		for u := from; u < to; u++ {
			if _, err := snap.Evaluate("f", "user-"+strconv.Itoa(u)); err != nil {
				t.Fatal(err)
			}
		}
	}
	evaluate(0, 20_000)
	if err := svc.FlushExposures(ctx); err != nil {
		t.Fatal(err)
	}
	mustChange(t, svc, "f", rollout.UpdateBucket("on", ptr(200), nil))
	evaluate(20_000, 30_000)
	rep, err := svc.Exposures(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	if rep.SRM == nil || rep.SRM.Version != 2 || rep.SRM.Total != 10_000 || rep.SRM.Mismatch {
		t.Fatalf("current version's check %+v, want version 2, 10,000 counts, no mismatch", rep.SRM)
	}
	if len(rep.VersionSRM) != 2 || rep.VersionSRM[1].Version != 1 || rep.VersionSRM[1].Total != 20_000 || rep.VersionSRM[1].Mismatch {
		t.Errorf("versions' checks %+v, want versions 2 and 1, no mismatch", rep.VersionSRM)
	}
	// Counts of version 1 read against version 2's shares would mismatch.
	v1 := map[string]int64{}
	for _, e := range rep.Versions {
		if e.Version == 1 {
			v1[e.Bucket] = e.Count
		}
	}
	cur, _ := svc.Snapshot().Feature("f")
	if r, _ := stats.CheckSRM(1, v1, cur.Ring().Shares()); !r.Mismatch {
		t.Errorf("version 1's counts against version 2's shares: %+v, want a mismatch", r)
	}
}
