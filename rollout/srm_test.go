package rollout_test

import (
	"context"
	"math"
	"strconv"
	"testing"

	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/stats"
)

// TestExposuresSRM: the exposure report checks the current version's
// distinct users and every version's against the shares each served.
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
	mustChange(t, svc, "f", change.UpdateBucket("on", ptr(200), nil))
	evaluate(20_000, 30_000)
	rep, err := svc.Exposures(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	about := func(got, want int64) bool { return math.Abs(float64(got-want)) <= 0.05*float64(want) }
	if rep.SRM == nil || rep.SRM.Version != 2 || !about(rep.SRM.Total, 10_000) || rep.SRM.Mismatch || !rep.SRM.Estimated {
		t.Fatalf("current version's check %+v, want version 2, ≈ 10,000 users, no mismatch", rep.SRM)
	}
	if len(rep.VersionSRM) != 2 || rep.VersionSRM[1].Version != 1 || !about(rep.VersionSRM[1].Total, 20_000) || rep.VersionSRM[1].Mismatch {
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

// TestExposuresCountDistinctUsers: three looks at the same 2,000 users are
// 6,000 evaluations but ≈ 2,000 users, per bucket, at the version and a
// day, whether flushed to the store or still in memory.
func TestExposuresCountDistinctUsers(t *testing.T) {
	ctx := context.Background()
	svc, _ := newService(t)
	mustCreate(t, svc, feature.Feature{Key: "f", Enabled: true, Salt: "f", Buckets: []feature.Bucket{{Name: "off", Replicas: 100}, {Name: "on", Replicas: 100}}})
	for look := range 3 {
		snap := svc.Snapshot()
		for u := range 2000 {
			if _, err := snap.Evaluate("f", "user-"+strconv.Itoa(u)); err != nil {
				t.Fatal(err)
			}
		}
		if look < 2 { // the last look stays in memory
			if err := svc.FlushExposures(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	rep, err := svc.Exposures(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	near := func(got, want int64) bool { return math.Abs(float64(got-want)) <= 0.03*float64(want) }
	if rep.Total != 6000 || rep.LastDay != 6000 {
		t.Errorf("evaluations: total %d, last day %d, want 6000", rep.Total, rep.LastDay)
	}
	if !near(rep.Users, 2000) || !near(rep.LastDayUsers, 2000) {
		t.Errorf("users %d, users in the last day %d, want ≈ 2000", rep.Users, rep.LastDayUsers)
	}
	var sum int64
	for _, b := range rep.Buckets {
		sum += b.Users
		if b.Count < 2*b.Users || b.Count > 4*b.Users {
			t.Errorf("bucket %v: %d evaluations of %d users, want about 3 each", b.Bucket, b.Count, b.Users)
		}
	}
	if !near(sum, 2000) {
		t.Errorf("the buckets' users add up to %d, want ≈ 2000", sum)
	}
}

// TestSRMWaitsForUsers: a tutorial's few users, evaluated many times and
// all in one bucket, never raise the sample-ratio alarm: it waits until
// every bucket expects at least stats.SRMMinExpected users.
func TestSRMWaitsForUsers(t *testing.T) {
	ctx := context.Background()
	svc, _ := newService(t)
	mustCreate(t, svc, feature.Feature{Key: "f", Enabled: true, Salt: "f", Buckets: []feature.Bucket{{Name: "off", Replicas: 100}, {Name: "on", Replicas: 100}}})
	snap := svc.Snapshot()
	var onUsers []string
	for u := 0; len(onUsers) < 150; u++ {
		id := "user-" + strconv.Itoa(u)
		if e, _ := snap.Peek("f", id); e.Bucket == "on" {
			onUsers = append(onUsers, id)
		}
	}
	for range 1000 { // 150,000 evaluations, all of "on"
		for _, id := range onUsers {
			if _, err := snap.Evaluate("f", id); err != nil {
				t.Fatal(err)
			}
		}
	}
	rep, err := svc.Exposures(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	if rep.SRM == nil || rep.SRM.Mismatch || !rep.SRM.Waiting || rep.SRM.Warning != "" {
		t.Errorf("check of 150 users all in one bucket: %+v, want waiting, no mismatch", rep.SRM)
	}
	// The same imbalance in evaluations, read as users, would alarm.
	if r, _ := stats.CheckSRM(1, map[string]int64{"on": 150_000}, map[string]float64{"on": 0.5, "off": 0.5}); !r.Mismatch {
		t.Errorf("150,000 evaluations in one of two halves: %+v, want a mismatch", r)
	}
}
