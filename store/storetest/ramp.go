package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/ramp"
)

// newRamp returns an active ramp of feature f at revision 1 with every
// field set.
func newRamp(id string, f feature.Feature, created time.Time) ramp.Ramp {
	churn := 0.3
	applied := t0.Add(time.Minute)
	return ramp.Ramp{
		ID: id, Feature: f.Key, FeatureID: f.ID, Bucket: "treatment",
		Steps: []ramp.Step{
			{Share: 0.05, At: t0, Applied: &applied, Version: 2, Replicas: 12, Reached: 0.0512},
			{Share: 0.5, At: t0.Add(24 * time.Hour)},
			{Share: 1, At: t0.Add(48 * time.Hour)},
		},
		MaxChurn: &churn, Tolerance: 0.005, State: ramp.Active, Next: 1,
		Replicas: 12, Actor: "ops@example.com", Revision: 1, CreatedAt: created, UpdatedAt: created,
	}
}

func wantRamps(t *testing.T, s Store, key string, want ...ramp.Ramp) {
	t.Helper()
	got, err := s.Ramps(context.Background(), key)
	if err != nil {
		t.Fatalf("Ramps(%q) = %v", key, err)
	}
	if want == nil {
		want = []ramp.Ramp{}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Ramps(%q) mismatch (-want +got):\n%s", key, diff)
	}
}

func testRamps(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	f, g := newFeature("f"), newFeature("g")
	create(t, s, f)
	create(t, s, g)
	wantRamps(t, s, "")
	rf := newRamp("ramp-f", f, t0)
	rg := newRamp("ramp-g", g, t0.Add(-time.Hour)) // older: listed first
	for _, r := range []ramp.Ramp{rf, rg} {
		if err := s.CreateRamp(ctx, r, nil, nil); err != nil {
			t.Fatalf("CreateRamp(%s) = %v", r.ID, err)
		}
	}
	got, err := s.Ramp(ctx, "ramp-f")
	if err != nil {
		t.Fatalf("Ramp(ramp-f) = %v", err)
	}
	if diff := cmp.Diff(rf, got); diff != "" {
		t.Errorf("Ramp(ramp-f) mismatch (-want +got):\n%s", diff)
	}
	_, err = s.Ramp(ctx, "missing")
	wantCode(t, "Ramp(missing)", err, feature.ENotFound)
	wantRamps(t, s, "", rg, rf)
	wantRamps(t, s, "f", rf)
	wantRamps(t, s, "nothing")

	// One live ramp per feature, whichever handle asks.
	other := o.Open(t)
	wantCode(t, "CreateRamp(second live ramp of f)", other.CreateRamp(ctx, newRamp("ramp-f2", f, t0), nil, nil), feature.EConflict)
	wantCode(t, "CreateRamp(same ID)", s.CreateRamp(ctx, newRamp("ramp-f", newFeature("h"), t0), nil, nil), feature.EConflict)

	// Optimistic updates: revision 2 from 1 once; a stale copy loses.
	paused := rf.Clone()
	paused.State, paused.Reason, paused.Revision = ramp.Paused, "paused by ops", 2
	if err := s.UpdateRamp(ctx, paused, nil); err != nil {
		t.Fatalf("UpdateRamp(to revision 2) = %v", err)
	}
	stale := rf.Clone()
	stale.State, stale.Revision = ramp.Canceled, 2
	wantCode(t, "UpdateRamp(stale, other handle)", other.UpdateRamp(ctx, stale, nil), feature.EConflict)
	missing := newRamp("missing", f, t0)
	missing.Revision = 2
	wantCode(t, "UpdateRamp(missing)", s.UpdateRamp(ctx, missing, nil), feature.ENotFound)
	wantRamps(t, other, "f", paused)
	// A paused ramp is live; a canceled one frees the feature for another.
	wantCode(t, "CreateRamp(beside a paused ramp)", s.CreateRamp(ctx, newRamp("ramp-f2", f, t0), nil, nil), feature.EConflict)
	canceled := paused.Clone()
	canceled.State, canceled.Revision = ramp.Canceled, 3
	if err := other.UpdateRamp(ctx, canceled, nil); err != nil {
		t.Fatalf("UpdateRamp(canceled) = %v", err)
	}
	rf2 := newRamp("ramp-f2", f, t0.Add(time.Hour))
	if err := s.CreateRamp(ctx, rf2, nil, nil); err != nil {
		t.Fatalf("CreateRamp(after cancel) = %v", err)
	}
	wantRamps(t, s, "f", canceled, rf2)
	// Making the canceled ramp live again beside the new one is refused.
	back := canceled.Clone()
	back.State, back.Revision = ramp.Active, 4
	wantCode(t, "UpdateRamp(second live ramp)", s.UpdateRamp(ctx, back, nil), feature.EConflict)
	wantRamps(t, s, "f", canceled, rf2)
}

func testRampStep(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	f := newFeature("f")
	create(t, s, f)
	r := newRamp("ramp", f, t0)
	if err := s.CreateRamp(ctx, r, nil, nil); err != nil {
		t.Fatalf("CreateRamp = %v", err)
	}
	rev0, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	step := func(f feature.Feature, r ramp.Ramp) (feature.Feature, rollout.Version, ramp.Ramp) {
		g := next(f)
		next := r.Clone()
		next.Revision++
		next.Next++
		next.Steps[r.Next].Version = g.Version
		return g, versionOf(g), next
	}

	// Racing from two handles, as two instances: exactly one writes.
	g, v, r2 := step(f, r)
	handles := []Store{s, o.Open(t)}
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = handles[i%2].ApplyRampStep(ctx, g, v, r2)
		}()
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case feature.ErrorCode(err) != feature.EConflict:
			t.Errorf("ApplyRampStep (racer %d) = %v, want nil or a conflict", i, err)
		}
	}
	if won != 1 {
		t.Errorf("%d racers applied the step, want exactly 1 (errors %v)", won, errs)
	}
	wantFeature(t, s, g)
	wantRamps(t, s, "f", r2)
	wantRevision(t, s, rev0+1)
	vs, err := s.Versions(ctx, "f", 0, 0)
	if err != nil || len(vs) != 2 || !cmp.Equal(vs[0], v) {
		t.Errorf("Versions(f) = %d entries (newest %+v), %v; want 2, the newest the step's", len(vs), vs, err)
	}

	// A stale ramp: the feature is not written either.
	h, hv, _ := step(g, r2)
	wantCode(t, "ApplyRampStep(stale ramp)", s.ApplyRampStep(ctx, h, hv, r2), feature.EConflict)
	wantFeature(t, s, g)
	// A stale feature (changed by hand meanwhile): the ramp is not
	// written either.
	_, _, r3 := step(g, r2)
	wantCode(t, "ApplyRampStep(stale feature)", s.ApplyRampStep(ctx, g, v, r3), feature.EConflict)
	wantRamps(t, s, "f", r2)
	wantRevision(t, s, rev0+1)
	// Both fresh: both written.
	if err := s.ApplyRampStep(ctx, h, hv, r3); err != nil {
		t.Fatalf("ApplyRampStep(fresh) = %v", err)
	}
	wantFeature(t, s, h)
	wantRamps(t, s, "f", r3)
	wantRevision(t, s, rev0+2)
}
