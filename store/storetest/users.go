package storetest

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/experiment"
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

// testExperimentHistoryStore: dropped first exposures add up per
// experiment; one snapshot a day is kept (the day's last), read oldest
// first and bounded; tracked events are purged oldest first, at most the
// limit a call, only those before the time and of the store's
// environment.
func testExperimentHistoryStore(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	if err := s.CreateMetric(ctx, newMetric("purchase", experiment.MetricConversion), audit.Event{}); err != nil {
		t.Fatal(err)
	}
	f := newFeature("f")
	create(t, s, f)
	if err := s.StartExperiment(ctx, newExperiment(f, "x1", "purchase"), audit.Event{}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []map[string]int64{{"x1": 3}, {"x1": 4, "gone": 9}} {
		if err := o.Open(t).AddDroppedExposures(ctx, d); err != nil {
			t.Fatalf("AddDroppedExposures(%v) = %v", d, err)
		}
	}
	if x, err := s.Experiment(ctx, f.ID, "x1"); err != nil || x.DroppedExposures != 7 {
		t.Errorf("Experiment(x1) = %d dropped, %v; want 7", x.DroppedExposures, err)
	}

	day := t0.Truncate(24 * time.Hour)
	for i, at := range []time.Time{day.Add(time.Hour), day.Add(5 * time.Hour), day.Add(26 * time.Hour), day.Add(50 * time.Hour)} {
		data := fmt.Appendf(nil, `{"at":%q,"lifts":{"purchase":{"treatment":{"value":%d,"ci":[0,1]}}}}`, at.Format(time.RFC3339), i)
		if err := s.SaveResultsSnapshot(ctx, "x1", at, data); err != nil {
			t.Fatalf("SaveResultsSnapshot(%v) = %v", at, err)
		}
	}
	if err := s.SaveResultsSnapshot(ctx, "gone", day, []byte(`{}`)); err != nil {
		t.Errorf("SaveResultsSnapshot(an experiment that does not exist) = %v, want it dropped", err)
	}
	snaps, err := o.Open(t).ResultsSnapshots(ctx, "x1", 10)
	if err != nil || len(snaps) != 3 {
		t.Fatalf("ResultsSnapshots(x1) = %+v, %v; want 3 days", snaps, err)
	}
	for i, want := range []float64{1, 2, 3} { // the first day's last reading, then one a day
		if got := snaps[i].Lifts["purchase"]["treatment"].Value; got != want {
			t.Errorf("snapshot %d: lift %v, want %v", i, got, want)
		}
	}
	if last2, _ := s.ResultsSnapshots(ctx, "x1", 2); len(last2) != 2 || last2[1].Lifts["purchase"]["treatment"].Value != 3 {
		t.Errorf("ResultsSnapshots(x1, 2) = %+v, want the last two days, oldest first", last2)
	}

	other := o.In("staging")
	for i, st := range []Store{s, s, other} {
		events := make([]experiment.TrackedEvent, 5)
		for j := range events {
			events[j] = experiment.TrackedEvent{Metric: "purchase", UserHash: int64(j), Value: 1, At: t0.Add(time.Duration(i*10+j) * time.Minute)}
		}
		if _, err := st.AddTrackBatch(ctx, fmt.Sprintf("purge-batch-%d", i), t0, events); err != nil {
			t.Fatal(err)
		}
	}
	before := t0.Add(12 * time.Minute) // the first 5 events and 2 of the next
	if n, err := s.PurgeTrackedEvents(ctx, before, 4); n != 4 || err != nil {
		t.Errorf("PurgeTrackedEvents(limit 4) = %d, %v; want 4", n, err)
	}
	if n, err := s.PurgeTrackedEvents(ctx, before, 100); n != 3 || err != nil {
		t.Errorf("PurgeTrackedEvents() again = %d, %v; want the other 3", n, err)
	}
	if n, err := other.PurgeTrackedEvents(ctx, t0.Add(time.Hour), 100); n != 5 || err != nil {
		t.Errorf("PurgeTrackedEvents(staging) = %d, %v; want staging's 5", n, err)
	}
}

// testExperimentMillion, run with ROLLOUT_BIG_TESTS=1: an experiment of
// 1,000,000 exposed users (a tenth of them with an event) reads its users
// and totals in bounded memory; it logs the time, the memory allocated and
// the bytes a user costs in experiment_users (indexes included), which
// docs/performance.md reports. Nothing asserts a duration.
func testExperimentMillion(t *testing.T, o Opened) {
	if os.Getenv("ROLLOUT_BIG_TESTS") != "1" {
		t.Skip("set ROLLOUT_BIG_TESTS=1 to read an experiment of 1,000,000 users")
	}
	ctx := context.Background()
	s := o.Store
	if err := s.CreateMetric(ctx, newMetric("purchase", experiment.MetricConversion), audit.Event{}); err != nil {
		t.Fatal(err)
	}
	f := newFeature("f")
	create(t, s, f)
	const id = "8d1f2c3b-5a6e-4f70-9b8c-1d2e3f4a5b6c" // as long as real IDs, which every row keeps
	x := newExperiment(f, id, "purchase")
	if err := s.StartExperiment(ctx, x, audit.Event{}); err != nil {
		t.Fatal(err)
	}
	const users, part = 1_000_000, 5_000
	var before int64
	if o.TableBytes != nil {
		before = o.TableBytes(t, "experiment_users")
	}
	start := time.Now()
	hash := func(i int) int64 { return int64(hll.Hash(fmt.Sprint("user-", i))) }
	xs := make([]experiment.FirstExposure, 0, part)
	for i := range users {
		bucket := "control"
		if i%2 == 1 {
			bucket = "treatment"
		}
		if xs = append(xs, experiment.FirstExposure{Experiment: id, UserHash: hash(i), Bucket: bucket, Version: 1, At: t0}); len(xs) == part {
			if err := s.AddFirstExposures(ctx, xs); err != nil {
				t.Fatal(err)
			}
			xs = xs[:0]
		}
	}
	t.Logf("wrote %d first exposures in %v", users, time.Since(start).Round(time.Millisecond))
	if o.TableBytes != nil {
		after := o.TableBytes(t, "experiment_users")
		t.Logf("experiment_users: %d bytes for %d users: %.1f bytes a user, indexes included", after-before, users, float64(after-before)/users)
	}
	var events []experiment.TrackedEvent
	for i := 0; i < users; i += 10 {
		if events = append(events, experiment.TrackedEvent{Metric: "purchase", UserHash: hash(i), Value: 1, At: t0.Add(time.Minute)}); len(events) == experiment.MaxTrackBatch {
			if _, err := s.AddTrackBatch(ctx, fmt.Sprint("big-", i), t0, events); err != nil {
				t.Fatal(err)
			}
			events = events[:0]
		}
	}

	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	start = time.Now()
	byBucket, multiple, err := s.ExperimentUsers(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	totals, err := s.ExperimentTotals(ctx, id, "purchase", t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	runtime.ReadMemStats(&m1)
	alloc := m1.TotalAlloc - m0.TotalAlloc
	t.Logf("read users and totals of %d users in %v, allocating %.1f MiB", users, took.Round(time.Millisecond), float64(alloc)/(1<<20))
	var n, conv int64
	for _, tt := range totals {
		n += tt.Users
		conv += tt.Converts
	}
	if byBucket["control"]+byBucket["treatment"] != users || multiple != 0 || n != users || conv != users/10 {
		t.Errorf("users %v (%d multiple), totals %d users %d converted; want %d users, %d converted", byBucket, multiple, n, conv, users, users/10)
	}
	if alloc > 64<<20 {
		t.Errorf("reading the results allocated %d bytes, want them bounded (under 64 MiB) whatever the users", alloc)
	}
}
