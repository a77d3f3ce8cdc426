package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/experiment"
	"github.com/rollout/rollout/rollout/feature"
)

// The contract of experiment.ExperimentStore: metrics, tracked events,
// experiments and their first exposures.

func newMetric(key string, kind experiment.MetricKind) experiment.Metric {
	return experiment.Metric{Key: key, Kind: kind, Description: "what <users> do", HigherIsBetter: true, CreatedAt: t0.Truncate(time.Millisecond), CreatedBy: "ada"}
}

func newExperiment(f feature.Feature, id string, metrics ...string) experiment.Experiment {
	return experiment.Experiment{ID: id, Feature: f.Key, FeatureID: f.ID, Name: "checkout " + id, Control: "control",
		Metrics: metrics, Hypothesis: "treatment sells more", Version: f.Version,
		Shares: map[string]float64{"control": 0.5, "treatment": 0.5}, Status: "running",
		StartedAt: t0.Truncate(time.Millisecond), StartedBy: "ada"}
}

func testMetrics(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	buy, rev := newMetric("purchase", experiment.MetricConversion), newMetric("revenue", experiment.MetricMean)
	rev.HigherIsBetter = false
	for _, m := range []experiment.Metric{rev, buy} {
		if err := s.CreateMetric(ctx, m, audit.Event{}); err != nil {
			t.Fatalf("CreateMetric(%q) = %v", m.Key, err)
		}
	}
	if err := s.CreateMetric(ctx, buy, audit.Event{}); feature.ErrorCode(err) != feature.EConflict {
		t.Errorf("CreateMetric(purchase) again = %v, want EConflict", err)
	}
	got, err := s.Metrics(ctx)
	if err != nil {
		t.Fatalf("Metrics() = %v", err)
	}
	if diff := cmp.Diff([]experiment.Metric{buy, rev}, got); diff != "" {
		t.Errorf("Metrics() mismatch (-want +got):\n%s", diff)
	}
	if m, err := o.Open(t).Metric(ctx, "revenue"); err != nil || !cmp.Equal(m, rev) {
		t.Errorf("Metric(revenue) = %+v, %v; want %+v", m, err, rev)
	}
	if _, err := s.Metric(ctx, "nope"); feature.ErrorCode(err) != feature.ENotFound {
		t.Errorf("Metric(nope) = %v, want ENotFound", err)
	}
	if err := s.DeleteMetric(ctx, "revenue", audit.Event{}); err != nil {
		t.Fatalf("DeleteMetric(revenue) = %v", err)
	}
	if err := s.DeleteMetric(ctx, "revenue", audit.Event{}); feature.ErrorCode(err) != feature.ENotFound {
		t.Errorf("DeleteMetric(revenue) again = %v, want ENotFound", err)
	}
	if got, _ := s.Metrics(ctx); len(got) != 1 {
		t.Errorf("Metrics() after a delete = %d metrics, want 1", len(got))
	}
}

func testExperimentLifecycle(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	if err := s.CreateMetric(ctx, newMetric("purchase", experiment.MetricConversion), audit.Event{}); err != nil {
		t.Fatal(err)
	}
	f, g := newFeature("f"), newFeature("g")
	create(t, s, f)
	create(t, s, g)
	x1 := newExperiment(f, "x1", "purchase")
	if err := s.StartExperiment(ctx, x1, audit.Event{}); err != nil {
		t.Fatalf("StartExperiment(x1) = %v", err)
	}
	if err := o.Open(t).StartExperiment(ctx, newExperiment(f, "x2", "purchase"), audit.Event{}); feature.ErrorCode(err) != feature.EConflict {
		t.Errorf("StartExperiment(x2) while x1 runs on the feature = %v, want EConflict", err)
	}
	if err := s.StartExperiment(ctx, newExperiment(g, "y1", "purchase"), audit.Event{}); err != nil {
		t.Errorf("StartExperiment(y1) on another feature = %v", err)
	}
	if got, err := s.Experiment(ctx, f.ID, "x1"); err != nil || !cmp.Equal(got, x1) {
		t.Errorf("Experiment(x1) = %+v, %v; want %+v", got, err, x1)
	}
	if _, err := s.Experiment(ctx, g.ID, "x1"); feature.ErrorCode(err) != feature.ENotFound {
		t.Errorf("Experiment(x1) of another feature = %v, want ENotFound", err)
	}
	if err := s.DeleteMetric(ctx, "purchase", audit.Event{}); feature.ErrorCode(err) != feature.EConflict {
		t.Errorf("DeleteMetric(purchase) while experiments read it = %v, want EConflict", err)
	}
	running, err := s.RunningExperiments(ctx)
	if err != nil || len(running) != 2 {
		t.Errorf("RunningExperiments() = %d, %v; want 2", len(running), err)
	}

	stopAt := t0.Add(time.Hour).Truncate(time.Millisecond)
	stopped, err := s.StopExperiment(ctx, f.ID, "x1", stopAt, "bob", audit.Event{})
	if err != nil {
		t.Fatalf("StopExperiment(x1) = %v", err)
	}
	if stopped.Status != "stopped" || stopped.StoppedAt == nil || !stopped.StoppedAt.Equal(stopAt) || stopped.StoppedBy != "bob" {
		t.Errorf("StopExperiment(x1) = %+v, want stopped at %v by bob", stopped, stopAt)
	}
	if _, err := s.StopExperiment(ctx, f.ID, "x1", stopAt, "bob", audit.Event{}); feature.ErrorCode(err) != feature.EConflict {
		t.Errorf("StopExperiment(x1) again = %v, want EConflict", err)
	}
	if _, err := s.StopExperiment(ctx, f.ID, "nope", stopAt, "bob", audit.Event{}); feature.ErrorCode(err) != feature.ENotFound {
		t.Errorf("StopExperiment(nope) = %v, want ENotFound", err)
	}
	x3 := newExperiment(f, "x3", "purchase")
	x3.StartedAt = stopAt.Add(time.Minute)
	if err := s.StartExperiment(ctx, x3, audit.Event{}); err != nil {
		t.Errorf("StartExperiment(x3) after x1 stopped = %v", err)
	}
	list, err := s.Experiments(ctx, f.ID)
	if err != nil || len(list) != 2 || list[0].ID != "x3" || list[1].ID != "x1" {
		t.Errorf("Experiments(f) = %+v, %v; want x3 then x1", list, err)
	}
	missing := newExperiment(feature.Feature{ID: "gone", Key: "gone"}, "z", "purchase")
	if err := s.StartExperiment(ctx, missing, audit.Event{}); feature.ErrorCode(err) != feature.ENotFound {
		t.Errorf("StartExperiment on a missing feature row = %v, want ENotFound", err)
	}
}

func testExperimentUsers(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	for _, m := range []experiment.Metric{newMetric("purchase", experiment.MetricConversion), newMetric("revenue", experiment.MetricMean)} {
		if err := s.CreateMetric(ctx, m, audit.Event{}); err != nil {
			t.Fatal(err)
		}
	}
	f := newFeature("f")
	create(t, s, f)
	if err := s.StartExperiment(ctx, newExperiment(f, "x1", "purchase", "revenue"), audit.Event{}); err != nil {
		t.Fatal(err)
	}
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	first := []experiment.FirstExposure{
		{Experiment: "x1", UserHash: 1, Bucket: "control", Version: 1, At: at(0)},
		{Experiment: "x1", UserHash: 2, Bucket: "control", Version: 1, At: at(0)},
		{Experiment: "x1", UserHash: 3, Bucket: "treatment", Version: 1, At: at(0)},
		{Experiment: "x1", UserHash: 4, Bucket: "treatment", Version: 1, At: at(10)},
		{Experiment: "x1", UserHash: 5, Bucket: "treatment", Version: 1, At: at(0)},
		{Experiment: "x1", UserHash: 5, Bucket: "treatment", Version: 1, At: at(1)}, // the same, again in the batch
		{Experiment: "gone", UserHash: 6, Bucket: "treatment", Version: 1, At: at(0)},
	}
	// Two handles at once: the store keeps one first exposure per user.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, h := range []Store{s, o.Open(t)} {
		wg.Go(func() { errs[i] = h.AddFirstExposures(ctx, first) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("AddFirstExposures() = %v", err)
		}
	}
	// User 2 is served treatment later: a multiple exposure; user 1 is
	// seen again in its bucket, and stays.
	if err := s.AddFirstExposures(ctx, []experiment.FirstExposure{
		{Experiment: "x1", UserHash: 2, Bucket: "treatment", Version: 2, At: at(20)},
		{Experiment: "x1", UserHash: 1, Bucket: "control", Version: 2, At: at(20)},
	}); err != nil {
		t.Fatal(err)
	}
	users, multiple, err := s.ExperimentUsers(ctx, "x1")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int64{"control": 1, "treatment": 3}; !cmp.Equal(users, want) || multiple != 1 {
		t.Errorf("ExperimentUsers(x1) = %v, %d multiple; want %v, 1", users, multiple, want)
	}

	events := []experiment.TrackedEvent{
		{Metric: "purchase", UserHash: 1, Value: 1, At: at(5)},
		{Metric: "purchase", UserHash: 3, Value: 1, At: at(5)},
		{Metric: "purchase", UserHash: 3, Value: 1, At: at(6)},  // counted once
		{Metric: "purchase", UserHash: 4, Value: 1, At: at(5)},  // before user 4's exposure
		{Metric: "purchase", UserHash: 5, Value: 1, At: at(90)}, // after until
		{Metric: "purchase", UserHash: 2, Value: 1, At: at(30)}, // a multiple exposure
		{Metric: "revenue", UserHash: 3, Value: 10, At: at(5)},
		{Metric: "revenue", UserHash: 3, Value: 2.5, At: at(7)},
		{Metric: "revenue", UserHash: 5, Value: 4, At: at(5)},
		{Metric: "revenue", UserHash: 5, Value: -1, At: at(1)}, // at its exposure: counted
		{Metric: "nope", UserHash: 5, Value: 100, At: at(5)},   // no such metric: dropped
	}
	if ok, err := s.AddTrackBatch(ctx, "track-0001", at(60), events); !ok || err != nil {
		t.Fatalf("AddTrackBatch(track-0001) = %v, %v; want true, nil", ok, err)
	}
	until := at(60)
	conv, err := o.Open(t).ExperimentTotals(ctx, "x1", "purchase", until)
	if err != nil {
		t.Fatal(err)
	}
	want := []experiment.BucketTotals{
		{Bucket: "control", Users: 1, Converts: 1, Sum: 1, SumSq: 1},
		{Bucket: "treatment", Users: 3, Converts: 1, Sum: 2, SumSq: 4},
	}
	if diff := cmp.Diff(want, conv); diff != "" {
		t.Errorf("ExperimentTotals(purchase) mismatch (-want +got):\n%s", diff)
	}
	rev, err := s.ExperimentTotals(ctx, "x1", "revenue", until)
	if err != nil {
		t.Fatal(err)
	}
	want = []experiment.BucketTotals{
		{Bucket: "control", Users: 1},
		{Bucket: "treatment", Users: 3, Converts: 2, Sum: 12.5 + 3, SumSq: 12.5*12.5 + 9},
	}
	if diff := cmp.Diff(want, rev); diff != "" {
		t.Errorf("ExperimentTotals(revenue) mismatch (-want +got):\n%s", diff)
	}
}

func testTrackBatches(t *testing.T, o Opened) {
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
	if err := s.AddFirstExposures(ctx, []experiment.FirstExposure{{Experiment: "x1", UserHash: 7, Bucket: "control", Version: 1, At: t0}}); err != nil {
		t.Fatal(err)
	}
	ev := []experiment.TrackedEvent{{Metric: "purchase", UserHash: 7, Value: 3, At: t0.Add(time.Minute)}}
	converted := func() float64 {
		t.Helper()
		tot, err := s.ExperimentTotals(ctx, "x1", "purchase", t0.Add(48*time.Hour))
		if err != nil || len(tot) != 1 {
			t.Fatalf("ExperimentTotals() = %+v, %v", tot, err)
		}
		return tot[0].Sum
	}
	for i, h := range []Store{s, o.Open(t)} {
		ok, err := h.AddTrackBatch(ctx, "batch-0001", t0, ev)
		if err != nil || ok != (i == 0) {
			t.Errorf("AddTrackBatch(batch-0001) #%d = %v, %v; want %v, nil", i+1, ok, err, i == 0)
		}
	}
	if got := converted(); got != 3 {
		t.Errorf("events' sum after one batch sent twice = %g, want 3", got)
	}
	// A day later the ID is forgotten, and the batch counts again.
	if ok, err := s.AddTrackBatch(ctx, "batch-0001", t0.Add(rollout.ExposureBatchMemory+time.Second), ev); !ok || err != nil {
		t.Errorf("AddTrackBatch(batch-0001) after %s = %v, %v; want true, nil", rollout.ExposureBatchMemory, ok, err)
	}
	if got := converted(); got != 6 {
		t.Errorf("events' sum after the ID expired = %g, want 6", got)
	}
	if err := s.DeleteMetric(ctx, "purchase", audit.Event{}); feature.ErrorCode(err) != feature.EConflict {
		t.Fatalf("DeleteMetric(purchase) = %v, want EConflict", err)
	}
	if _, err := s.StopExperiment(ctx, f.ID, "x1", t0.Add(time.Hour), "ada", audit.Event{}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMetric(ctx, "purchase", audit.Event{}); err != nil {
		t.Fatalf("DeleteMetric(purchase) after the experiment stopped = %v", err)
	}
	if got := converted(); got != 0 {
		t.Errorf("events' sum after their metric was deleted = %g, want 0", got)
	}
}

// testExperimentUserBytes stores 20,000 exposed users and reports the
// bytes each costs; it fails past 300 bytes a user (SQLite takes about 76,
// PostgreSQL about 204, its tuple headers and the text experiment ID in
// row and index).
func testExperimentUserBytes(t *testing.T, o Opened) {
	if o.TableBytes == nil {
		t.Skip("the store cannot tell its tables' sizes")
	}
	ctx := context.Background()
	s := o.Store
	if err := s.CreateMetric(ctx, newMetric("purchase", experiment.MetricConversion), audit.Event{}); err != nil {
		t.Fatal(err)
	}
	f := newFeature("f")
	create(t, s, f)
	x := newExperiment(f, "2f3c8a9e-4b1d-4e0f-9a7c-6d5e4f3a2b1c", "purchase")
	if err := s.StartExperiment(ctx, x, audit.Event{}); err != nil {
		t.Fatal(err)
	}
	before := o.TableBytes(t, "experiment_users")
	const users = 20_000
	xs := make([]experiment.FirstExposure, users)
	for i := range xs {
		b := "control"
		if i%2 == 1 {
			b = "treatment"
		}
		xs[i] = experiment.FirstExposure{Experiment: x.ID, UserHash: experiment.UserHash(fmt.Sprint(i)), Bucket: b, Version: 1, At: t0}
	}
	for part := range slices.Chunk(xs, 1000) {
		if err := s.AddFirstExposures(ctx, part); err != nil {
			t.Fatal(err)
		}
	}
	per := float64(o.TableBytes(t, "experiment_users")-before) / users
	t.Logf("storage per exposed user: %.0f bytes (%d users)", per, users)
	if per > 300 {
		t.Errorf("an exposed user costs %.0f bytes, want at most 300", per)
	}
}

// testExperimentEnvironments: experiments on the same feature key in two
// environments (two feature rows) are apart: each environment's store
// reads its running experiment alone, and an experiment's totals count
// the events tracked in its environment alone, though the users and the
// metric are the same.
func testExperimentEnvironments(t *testing.T, o Opened) {
	ctx := context.Background()
	if o.In == nil {
		t.Skip("the store cannot be bound to an environment")
	}
	envs, ok := o.Store.(rollout.EnvironmentStore)
	if !ok {
		t.Fatal("the store keeps no environments")
	}
	prod, staging := o.In(rollout.Production), o.In("staging")
	if err := envs.CreateEnvironment(ctx, rollout.Environment{Key: "staging", Name: "Staging", Position: 1, CreatedAt: t0}, nil,
		audit.Event{Time: t0, Actor: "ada", Kind: audit.EnvironmentCreate, Subject: "staging", Summary: "created staging"}); err != nil {
		t.Fatalf("CreateEnvironment(staging) = %v", err)
	}
	if err := prod.CreateMetric(ctx, newMetric("purchase", experiment.MetricConversion), audit.Event{}); err != nil {
		t.Fatal(err)
	}
	fp, fs := newFeature("f"), newFeature("f")
	fs.ID = "id-f-staging"
	create(t, prod, fp)
	create(t, staging, fs)
	xp, xs := newExperiment(fp, "xp", "purchase"), newExperiment(fs, "xs", "purchase")
	for _, st := range []struct {
		s Store
		x experiment.Experiment
	}{{prod, xp}, {staging, xs}} {
		if err := st.s.StartExperiment(ctx, st.x, audit.Event{}); err != nil {
			t.Fatalf("StartExperiment(%s) = %v", st.x.ID, err)
		}
	}
	for _, st := range []struct {
		s    Store
		want string
	}{{prod, "xp"}, {staging, "xs"}} {
		running, err := st.s.RunningExperiments(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(running) != 1 || running[0].ID != st.want {
			t.Errorf("RunningExperiments() of the store bound to %s = %v, want %s alone", st.want, running, st.want)
		}
	}
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	// The same users in both: 1 and 2 in control, 3 in treatment.
	for _, id := range []string{"xp", "xs"} {
		if err := prod.AddFirstExposures(ctx, []experiment.FirstExposure{
			{Experiment: id, UserHash: 1, Bucket: "control", Version: 1, At: at(0)},
			{Experiment: id, UserHash: 2, Bucket: "control", Version: 1, At: at(0)},
			{Experiment: id, UserHash: 3, Bucket: "treatment", Version: 1, At: at(0)},
		}); err != nil {
			t.Fatal(err)
		}
	}
	// Production's apps report user 1 and 3; staging's user 2 alone.
	if added, err := prod.AddTrackBatch(ctx, "batch-production", at(5), []experiment.TrackedEvent{
		{Metric: "purchase", UserHash: 1, Value: 1, At: at(5)},
		{Metric: "purchase", UserHash: 3, Value: 1, At: at(5)},
	}); err != nil || !added {
		t.Fatalf("AddTrackBatch(production) = %v, %v", added, err)
	}
	if added, err := staging.AddTrackBatch(ctx, "batch-staging", at(5), []experiment.TrackedEvent{
		{Metric: "purchase", UserHash: 2, Value: 1, At: at(5)},
	}); err != nil || !added {
		t.Fatalf("AddTrackBatch(staging) = %v, %v", added, err)
	}
	for _, c := range []struct {
		id   string
		want []experiment.BucketTotals
	}{
		{"xp", []experiment.BucketTotals{{Bucket: "control", Users: 2, Converts: 1, Sum: 1, SumSq: 1}, {Bucket: "treatment", Users: 1, Converts: 1, Sum: 1, SumSq: 1}}},
		{"xs", []experiment.BucketTotals{{Bucket: "control", Users: 2, Converts: 1, Sum: 1, SumSq: 1}, {Bucket: "treatment", Users: 1}}},
	} {
		// Whichever environment's store reads them.
		for _, s := range []Store{prod, staging} {
			got, err := s.ExperimentTotals(ctx, c.id, "purchase", at(60))
			if err != nil {
				t.Fatalf("ExperimentTotals(%s) = %v", c.id, err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("ExperimentTotals(%s) mismatch (-want +got):\n%s", c.id, diff)
			}
		}
	}
}
