package storetest

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/feature/hll"
)

// The contract of ExposureStore's distinct users (AddExposures and
// AddExposureBatch with sketches, ExposureUsers).

// sketchOf returns the binary sketch of the users named prefix+i for i in
// [from, to).
func sketchOf(prefix string, from, to int) []byte {
	s := new(hll.Sketch)
	for i := from; i < to; i++ {
		s.Insert(hll.Hash(fmt.Sprint(prefix, i)))
	}
	return s.Append(nil)
}

// readUsers returns the users of f per hour (zero: every hour), estimated.
func readUsers(t *testing.T, s Store, key string, since time.Time) map[time.Time]int64 {
	t.Helper()
	rows, err := s.ExposureUsers(context.Background(), key, since)
	if err != nil {
		t.Fatalf("ExposureUsers(%q) = %v", key, err)
	}
	out := map[time.Time]int64{}
	for _, r := range rows {
		var sk hll.Sketch
		if err := sk.UnmarshalBinary(r.Users); err != nil {
			t.Fatalf("stored sketch of %s hour %v: %v", r.Bucket, r.Hour, err)
		}
		out[r.Hour] += sk.Count()
	}
	return out
}

// testExposureUsers: sketches sent by any number of handles at once merge
// into the users of their hour and of every hour, as a union (users seen
// twice count once, a batch merged again changes nothing); hourly rows are
// kept for two days, the union with the version; a malformed sketch is
// refused and a deleted feature's users go with it.
func testExposureUsers(t *testing.T, o Opened) {
	ctx := context.Background()
	f := newFeature("f")
	create(t, o.Store, f)
	h1 := t0.Truncate(time.Hour)
	near := func(got, want int64) bool { return math.Abs(float64(got-want)) <= 0.03*float64(want) }

	// Four handles send overlapping users 0..1999 at once, in hour h1.
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range 4 {
		s := o.Open(t)
		wg.Go(func() {
			e := feature.Exposure{FeatureID: f.ID, Version: 1, Bucket: "control", Hour: h1, Count: 10, Users: sketchOf("u", i*400, i*400+800)}
			_, errs[i] = s.AddExposureBatch(ctx, fmt.Sprintf("users-batch-%d", i), h1, []feature.Exposure{e})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("AddExposureBatch(%d) = %v", i, err)
		}
	}
	// The same users again, as a plain flush: no more users.
	if err := o.Store.AddExposures(ctx, []feature.Exposure{{FeatureID: f.ID, Version: 1, Bucket: "control", Hour: h1, Count: 5, Users: sketchOf("u", 0, 2000)}}); err != nil {
		t.Fatalf("AddExposures(the same users) = %v", err)
	}
	got := readUsers(t, o.Open(t), "f", h1)
	if !near(got[time.Time{}], 2000) || !near(got[h1], 2000) || len(got) != 2 {
		t.Fatalf("users after overlapping batches = %v, want ≈ 2000 in hour %v and in all", got, h1)
	}

	// Two days later: the first hour's row is gone, the union stays.
	later := h1.Add(49 * time.Hour)
	if err := o.Store.AddExposures(ctx, []feature.Exposure{{FeatureID: f.ID, Version: 1, Bucket: "control", Hour: later, Count: 1, Users: sketchOf("new", 0, 100)}}); err != nil {
		t.Fatalf("AddExposures(later) = %v", err)
	}
	got = readUsers(t, o.Store, "f", h1)
	if _, ok := got[h1]; ok || !near(got[time.Time{}], 2100) || !near(got[later], 100) {
		t.Errorf("users two days later = %v, want hour %v gone, ≈ 2100 in all and ≈ 100 in hour %v", got, h1, later)
	}
	if got := readUsers(t, o.Store, "f", later.Add(time.Hour)); len(got) != 1 {
		t.Errorf("users since after the last hour = %v, want the union only", got)
	}

	bad := feature.Exposure{FeatureID: f.ID, Version: 1, Bucket: "control", Hour: later, Count: 1, Users: []byte{1, 12, 'd', 0}}
	if err := o.Store.AddExposures(ctx, []feature.Exposure{bad}); feature.ErrorCode(err) != feature.EInvalid {
		t.Errorf("AddExposures(a malformed sketch) = %v, want EInvalid", err)
	}

	if err := deleteFeature(ctx, o.Store, "f", 1); err != nil {
		t.Fatalf("delete f: %v", err)
	}
	gone := feature.Exposure{FeatureID: f.ID, Version: 1, Bucket: "control", Hour: later, Count: 1, Users: sketchOf("x", 0, 10)}
	if err := o.Store.AddExposures(ctx, []feature.Exposure{gone}); err != nil {
		t.Errorf("AddExposures(a deleted feature's users) = %v, want them dropped", err)
	}
	if rows, err := o.Store.ExposureUsers(ctx, "f", h1); err != nil || len(rows) != 0 {
		t.Errorf("ExposureUsers(deleted f) = %v, %v; want none", rows, err)
	}
}
