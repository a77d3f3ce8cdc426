package experiment_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/experiment"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store/sqlite"
)

// experimentSetup returns a service over a new SQLite database with the
// feature "checkout" (control and treatment, half each), the metrics
// "purchase" (conversion) and "basket" (mean), and its experiments.
func experimentSetup(t *testing.T, now func() time.Time) (*rollout.Service, *experiment.Experiments) {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	svc, err := rollout.NewService(ctx, db, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Create(ctx, feature.Feature{Key: "checkout", Enabled: true, Salt: "s",
		Buckets: []feature.Bucket{{Name: "control", Replicas: 50}, {Name: "treatment", Replicas: 50}}}, rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	x, err := experiment.NewExperiments(ctx, db, svc)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []experiment.Metric{{Key: "purchase", Kind: experiment.MetricConversion, HigherIsBetter: true}, {Key: "basket", Kind: experiment.MetricMean, HigherIsBetter: true}} {
		if _, err := x.CreateMetric(ctx, m, "ada"); err != nil {
			t.Fatal(err)
		}
	}
	return svc, x
}

// TestExperimentCountsUsers evaluates 2,000 users three times each: the
// experiment counts 2,000 users, split as the ring splits them, and an
// evaluation before the experiment started or a peek counts nobody.
func TestExperimentCountsUsers(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	svc, x := experimentSetup(t, func() time.Time { return now })
	if _, err := svc.Evaluate("checkout", "before"); err != nil {
		t.Fatal(err)
	}
	exp, err := x.Start(ctx, "checkout", experiment.ExperimentRequest{Name: "buy button", Control: "control", Metrics: []string{"purchase"}}, "ada")
	if err != nil {
		t.Fatalf("Start() = %v", err)
	}
	want := map[string]int64{}
	for i := range 2000 {
		user := fmt.Sprintf("user-%d", i)
		for range 3 {
			if _, err := svc.Evaluate("checkout", user); err != nil {
				t.Fatal(err)
			}
		}
		e, _ := svc.Snapshot().Peek("checkout", user)
		want[e.Bucket]++
		if _, err := svc.Snapshot().Peek("checkout", "peeked-"+user); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(time.Hour)
	res, err := x.Results(ctx, "checkout", exp.ID)
	if err != nil {
		t.Fatalf("Results() = %v", err)
	}
	got := map[string]int64{}
	for _, b := range res.Buckets {
		got[b.Bucket] = b.Users
	}
	if got["control"] != want["control"] || got["treatment"] != want["treatment"] {
		t.Errorf("Results() users = %v, want %v (each user once)", got, want)
	}
	if res.MultipleExposures != 0 || res.SRM == nil || res.SRM.Total != 2000 || res.SRM.Mismatch {
		t.Errorf("Results() = %d multiple, SRM %+v; want 0 and a check of 2,000 users without mismatch", res.MultipleExposures, res.SRM)
	}
	if _, err := x.Start(ctx, "checkout", experiment.ExperimentRequest{Name: "again", Control: "control", Metrics: []string{"purchase"}}, "ada"); feature.ErrorCode(err) != feature.EConflict {
		t.Errorf("Start() while one runs = %v, want EConflict", err)
	}
	if _, err := x.Stop(ctx, "checkout", exp.ID, "ada"); err != nil {
		t.Fatalf("Stop() = %v", err)
	}
	// Evaluations after the stop are not recorded.
	if _, err := svc.Evaluate("checkout", "late"); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Hour)
	res, err = x.Results(ctx, "checkout", exp.ID)
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	for _, b := range res.Buckets {
		total += b.Users
	}
	if total != 2000 || res.Experiment.Status != "stopped" {
		t.Errorf("Results() after the stop = %d users, status %q; want 2000, stopped", total, res.Experiment.Status)
	}
}

// TestExperimentMultipleExposures changes the shares mid-experiment: the
// users it moves to the other bucket are counted once as multiple
// exposures and left out of both buckets.
func TestExperimentMultipleExposures(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	svc, x := experimentSetup(t, func() time.Time { return now })
	exp, err := x.Start(ctx, "checkout", experiment.ExperimentRequest{Name: "shares", Control: "control", Metrics: []string{"purchase"}}, "ada")
	if err != nil {
		t.Fatal(err)
	}
	const users = 1000
	before := make([]string, users)
	for i := range users {
		e, err := svc.Evaluate("checkout", fmt.Sprintf("u%d", i))
		if err != nil {
			t.Fatal(err)
		}
		before[i] = e.Bucket
	}
	if err := x.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Change(ctx, "checkout", change.SetBuckets([]feature.Bucket{{Name: "control", Replicas: 20}, {Name: "treatment", Replicas: 80}}), rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	moved := 0
	stayed := map[string]int64{}
	for i := range users {
		for range 2 {
			e, err := svc.Evaluate("checkout", fmt.Sprintf("u%d", i))
			if err != nil {
				t.Fatal(err)
			}
			if e.Bucket != before[i] {
				moved++
				break
			}
		}
	}
	for i := range users {
		e, _ := svc.Snapshot().Peek("checkout", fmt.Sprintf("u%d", i))
		if e.Bucket == before[i] {
			stayed[e.Bucket]++
		}
	}
	if moved == 0 {
		t.Fatal("the share change moved nobody: the test tests nothing")
	}
	now = now.Add(time.Hour)
	res, err := x.Results(ctx, "checkout", exp.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, b := range res.Buckets {
		got[b.Bucket] = b.Users
	}
	if res.MultipleExposures != int64(moved) || got["control"] != stayed["control"] || got["treatment"] != stayed["treatment"] {
		t.Errorf("Results() = %v users, %d multiple; want %v, %d (the moved users left out)", got, res.MultipleExposures, stayed, moved)
	}
}

// TestExperimentConversions tracks purchases after and before users'
// exposures: only those after count, and a clear lift is significant.
func TestExperimentConversions(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	svc, x := experimentSetup(t, func() time.Time { return now })
	// An event before the experiment: it must not count.
	if _, err := x.Track(ctx, "early-batch", []experiment.TrackedEvent{{Metric: "purchase", User: "u1"}}, nil); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	exp, err := x.Start(ctx, "checkout", experiment.ExperimentRequest{Name: "lift", Control: "control", Metrics: []string{"purchase", "basket"}}, "ada")
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	var events []experiment.TrackedEvent
	var values []bool
	want := map[string]int64{}
	n := 0
	batch := 0
	flush := func() {
		if len(events) == 0 {
			return
		}
		batch++
		if _, err := x.Track(ctx, fmt.Sprintf("batch-%04d", batch), events, values); err != nil {
			t.Fatal(err)
		}
		events, values = nil, nil
	}
	for i := range 4000 {
		user := fmt.Sprintf("u%d", i)
		e, err := svc.Evaluate("checkout", user)
		if err != nil {
			t.Fatal(err)
		}
		rate := 10
		if e.Bucket == "treatment" {
			rate = 20
		}
		if i%100 < rate {
			want[e.Bucket]++
			events = append(events, experiment.TrackedEvent{Metric: "purchase", User: user, At: now.Add(time.Second)},
				experiment.TrackedEvent{Metric: "basket", User: user, Value: 30, At: now.Add(time.Second)})
			values = append(values, false, true)
		}
		if n++; len(events) >= 900 {
			flush()
		}
	}
	flush()
	now = now.Add(time.Hour)
	res, err := x.Results(ctx, "checkout", exp.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range res.Buckets {
		m := b.Metrics["purchase"]
		if m.UsersConverted != want[b.Bucket] {
			t.Errorf("bucket %s: users converted = %d, want %d", b.Bucket, m.UsersConverted, want[b.Bucket])
		}
		if b.Bucket == "treatment" && (m.Lift == nil || !m.Significant || m.Lift.CI[0] > 1 || m.Lift.CI[1] < 1) {
			t.Errorf("treatment's purchase = %+v, want a significant lift near +100 %%", m)
		}
		if b.Bucket == "control" && m.Lift != nil {
			t.Errorf("control's lift = %+v, want none", m.Lift)
		}
		mean := b.Metrics["basket"].Mean
		if want := 30 * float64(want[b.Bucket]) / float64(b.Users); mean < want-1e-9 || mean > want+1e-9 {
			t.Errorf("bucket %s: basket mean = %g, want %g", b.Bucket, mean, want)
		}
	}
}

// TestExperimentRefuses checks what an experiment or a batch of events
// must name.
func TestExperimentRefuses(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	_, x := experimentSetup(t, func() time.Time { return now })
	for _, req := range []experiment.ExperimentRequest{
		{Name: "", Control: "control", Metrics: []string{"purchase"}},
		{Name: "n", Control: "nope", Metrics: []string{"purchase"}},
		{Name: "n", Control: "control", Metrics: []string{"nope"}},
		{Name: "n", Control: "control"},
		{Name: "n", Control: "control", Metrics: []string{"purchase", "purchase"}},
	} {
		if _, err := x.Start(ctx, "checkout", req, "ada"); feature.ErrorCode(err) != feature.EInvalid {
			t.Errorf("Start(%+v) = %v, want EInvalid", req, err)
		}
	}
	if _, err := x.Start(ctx, "nope", experiment.ExperimentRequest{Name: "n", Control: "control", Metrics: []string{"purchase"}}, "ada"); feature.ErrorCode(err) != feature.ENotFound {
		t.Errorf("Start(nope) = %v, want ENotFound", err)
	}
	long := string(make([]byte, experiment.MaxTrackUser+1))
	for name, ev := range map[string]experiment.TrackedEvent{
		"unknown metric": {Metric: "nope", User: "u"},
		"no user":        {Metric: "purchase"},
		"long user":      {Metric: "purchase", User: long},
		"far past":       {Metric: "purchase", User: "u", At: now.Add(-experiment.MaxTrackAge - time.Minute)},
		"future":         {Metric: "purchase", User: "u", At: now.Add(time.Hour)},
		"huge value":     {Metric: "basket", User: "u", Value: 1e300},
	} {
		if _, err := x.Track(ctx, "batch-0001", []experiment.TrackedEvent{ev}, []bool{true}); feature.ErrorCode(err) != feature.EInvalid {
			t.Errorf("Track(%s) = %v, want EInvalid", name, err)
		}
	}
	if _, err := x.Track(ctx, "short", []experiment.TrackedEvent{{Metric: "purchase", User: "u"}}, nil); feature.ErrorCode(err) != feature.EInvalid {
		t.Errorf("Track(batch ID short) = %v, want EInvalid", err)
	}
	res, err := x.Track(ctx, "batch-0002", []experiment.TrackedEvent{{Metric: "purchase", User: "u"}}, nil)
	if err != nil || !res.Added {
		t.Fatalf("Track() = %+v, %v", res, err)
	}
	if res, err := x.Track(ctx, "batch-0002", []experiment.TrackedEvent{{Metric: "purchase", User: "u"}}, nil); err != nil || res.Added {
		t.Errorf("Track() again = %+v, %v; want not added", res, err)
	}
}

// BenchmarkEvaluateExperiment measures an evaluation of a feature without
// an experiment (the baseline: one atomic load more than before hooks) and
// with one running (the user hashed and remembered).
func BenchmarkEvaluateExperiment(b *testing.B) {
	ctx := context.Background()
	for _, running := range []bool{false, true} {
		b.Run(fmt.Sprintf("running=%v", running), func(b *testing.B) {
			svc, x := experimentSetupB(b)
			if running {
				if _, err := x.Start(ctx, "checkout", experiment.ExperimentRequest{Name: "bench", Control: "control", Metrics: []string{"purchase"}}, "ada"); err != nil {
					b.Fatal(err)
				}
			}
			users := make([]string, 1024)
			for i := range users {
				users[i] = fmt.Sprintf("user-%d", i)
			}
			snap := svc.Snapshot()
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				if _, err := snap.EvaluateOutcome("checkout", users[i%len(users)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

func experimentSetupB(b *testing.B) (*rollout.Service, *experiment.Experiments) {
	b.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "rollout.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	svc, err := rollout.NewService(ctx, db, nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := svc.Create(ctx, feature.Feature{Key: "checkout", Enabled: true, Salt: "s",
		Buckets: []feature.Bucket{{Name: "control", Replicas: 50}, {Name: "treatment", Replicas: 50}}}, rollout.ChangeOptions{}); err != nil {
		b.Fatal(err)
	}
	x, err := experiment.NewExperiments(ctx, db, svc)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := x.CreateMetric(ctx, experiment.Metric{Key: "purchase", Kind: experiment.MetricConversion}, "ada"); err != nil {
		b.Fatal(err)
	}
	return svc, x
}
