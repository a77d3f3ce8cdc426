package rollout_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/plan"
	"github.com/rollout/rollout/rollout/ramp"
	"github.com/rollout/rollout/store/postgres"
	"github.com/rollout/rollout/store/sqlite"
	"github.com/rollout/rollout/store/storetest"
)

// testClock is a clock tests move by hand; safe for concurrent use.
type testClock struct{ ns atomic.Int64 }

func newTestClock() *testClock {
	c := &testClock{}
	c.ns.Store(time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *testClock) Now() time.Time       { return time.Unix(0, c.ns.Load()).UTC() }
func (c *testClock) Add(d time.Duration)  { c.ns.Add(int64(d)) }
func (c *testClock) clock() rollout.Clock { return c.Now }
func onOff(key string, on, off int) feature.Feature {
	return feature.Feature{Key: key, Enabled: true, Salt: "salt-" + key, Buckets: []feature.Bucket{{Name: "on", Replicas: on}, {Name: "off", Replicas: off}}}
}

// openServices returns n services over one SQLite file, as n instances.
func openServices(t *testing.T, n int, clock rollout.Clock) []*rollout.Service {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rollout.db")
	var svcs []*rollout.Service
	for range n {
		db, err := sqlite.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		svc, err := rollout.NewService(context.Background(), db, clock)
		if err != nil {
			t.Fatal(err)
		}
		svcs = append(svcs, svc)
	}
	return svcs
}

var fiveSteps = []float64{0.05, 0.1, 0.25, 0.5, 1}

func mustRamp(t *testing.T, svc *rollout.Service, key string, spec ramp.Spec) ramp.Ramp {
	t.Helper()
	r, err := svc.CreateRamp(context.Background(), key, spec, "pm@example.com")
	if err != nil {
		t.Fatalf("CreateRamp(%s) = %v", key, err)
	}
	return r
}

func rampOf(t *testing.T, svc *rollout.Service, r ramp.Ramp) ramp.Ramp {
	t.Helper()
	got, err := svc.Ramp(context.Background(), r.Feature, r.ID)
	if err != nil {
		t.Fatalf("Ramp(%s) = %v", r.ID, err)
	}
	return got
}

// TestRampUsersStayIn: over 100,000 users, evaluated before and after each
// step, a user in the ramped bucket is in it at every later step; each
// step reaches its share within the tolerance and is a version by the
// actor ramp that names the step.
func TestRampUsersStayIn(t *testing.T) {
	clock := newTestClock()
	svc := openServices(t, 1, clock.clock())[0]
	ctx := context.Background()
	mustCreate(t, svc, onOff("f", 1, 300))
	r := mustRamp(t, svc, "f", ramp.Spec{Bucket: "on", Shares: fiveSteps, Every: 24 * time.Hour})

	const users = 100_000
	inside := make([]bool, users)
	bucketsOf := func() []string {
		out := make([]string, users)
		snap := svc.Snapshot()
		for u := range users {
			e, err := snap.Peek("f", fmt.Sprintf("user-%d", u))
			if err != nil {
				t.Fatal(err)
			}
			out[u] = e.Bucket
		}
		return out
	}
	before := bucketsOf()
	for i, target := range fiveSteps {
		if i > 0 {
			// Not due yet: nothing happens a minute early.
			clock.Add(24*time.Hour - time.Minute)
			if n, err := svc.ApplyDueRamps(ctx); n != 0 || err != nil {
				t.Fatalf("step %d a minute early: ApplyDueRamps = %d, %v; want 0, nil", i+1, n, err)
			}
			clock.Add(time.Minute)
		}
		if n, err := svc.ApplyDueRamps(ctx); n != 1 || err != nil {
			t.Fatalf("step %d: ApplyDueRamps = %d, %v; want 1, nil", i+1, n, err)
		}
		after := bucketsOf()
		entered, in := 0, 0
		for u := range users {
			if inside[u] && after[u] != "on" {
				t.Fatalf("step %d: user-%d was in on, is now in %q", i+1, u, after[u])
			}
			if before[u] != "on" && after[u] == "on" {
				entered++
			}
			if after[u] == "on" {
				inside[u] = true
				in++
			}
		}
		shares, _ := svc.Snapshot().Shares("f")
		if math.Abs(shares["on"]-target) > plan.DefaultTolerance+1e-12 {
			t.Errorf("step %d: on's share %.4f, want %.4f within %.3f", i+1, shares["on"], target, plan.DefaultTolerance)
		}
		if got := float64(in) / users; math.Abs(got-shares["on"]) > 0.01 {
			t.Errorf("step %d: %.4f of the sampled users in on, the ring says %.4f", i+1, got, shares["on"])
		}
		if entered == 0 {
			t.Errorf("step %d: no user entered on", i+1)
		}
		before = after
	}
	f, _ := svc.Snapshot().Feature("f")
	if len(f.Buckets) != 2 || f.Buckets[0].Name != "on" || f.Buckets[0].Replicas == 0 || f.Buckets[1].Replicas != 0 {
		t.Errorf("after the last step the buckets are %v, want on, and off kept at 0 replicas", f.Buckets)
	}
	vs, err := svc.Versions(ctx, "f", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 6 {
		t.Fatalf("history has %d versions, want 6 (created and 5 steps)", len(vs))
	}
	for i, v := range vs[:5] {
		step := 5 - i
		want := fmt.Sprintf("ramp on: step %d of 5, %g %%; ", step, 100*fiveSteps[step-1])
		if v.Actor != ramp.ActorFor(r) || !strings.HasPrefix(v.Summary, want) || !strings.Contains(v.Summary, "of users moved, all into on") {
			t.Errorf("version %d: actor %q, summary %q; want %q, %q", v.Version, v.Actor, v.Summary, ramp.ActorFor(r), want)
		}
	}
	got := rampOf(t, svc, r)
	if got.State != ramp.Done || got.Next != 5 {
		t.Errorf("ramp is %s at step %d, want done at 5", got.State, got.Next)
	}
	for i, st := range got.Steps {
		if st.Version != i+2 || st.Applied == nil {
			t.Errorf("step %d: version %d, applied %v; want version %d, a time", i+1, st.Version, st.Applied, i+2)
		}
	}
}

// TestRampExactlyOnce: two services over one database, as two instances,
// each with two runners applying due steps at the same time: every step
// applies once, and the history holds one version per step.
func TestRampExactlyOnce(t *testing.T) {
	clock := newTestClock()
	raceSteps(t, clock, openServices(t, 2, clock.clock()))
}

// TestRampExactlyOncePostgres is TestRampExactlyOnce with two instances
// over one PostgreSQL database.
func TestRampExactlyOncePostgres(t *testing.T) {
	dsn := storetest.PostgresDSN(t)
	clock := newTestClock()
	var svcs []*rollout.Service
	for range 2 {
		db, err := postgres.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		svc, err := rollout.NewService(context.Background(), db, clock.clock())
		if err != nil {
			t.Fatal(err)
		}
		svcs = append(svcs, svc)
	}
	raceSteps(t, clock, svcs)
}

func raceSteps(t *testing.T, clock *testClock, svcs []*rollout.Service) {
	t.Helper()
	ctx := context.Background()
	mustCreate(t, svcs[0], onOff("f", 2, 200))
	r := mustRamp(t, svcs[1], "f", ramp.Spec{Bucket: "on", Shares: fiveSteps, Every: time.Hour})
	for i := range fiveSteps {
		if i > 0 {
			clock.Add(time.Hour)
		}
		var (
			wg      sync.WaitGroup
			applied atomic.Int64
		)
		for k := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n, err := svcs[k%2].ApplyDueRamps(ctx)
				if err != nil {
					t.Errorf("step %d, runner %d: ApplyDueRamps = %v", i+1, k, err)
				}
				applied.Add(int64(n))
			}()
		}
		wg.Wait()
		if n := applied.Load(); n != 1 {
			t.Errorf("step %d applied %d times, want once", i+1, n)
		}
	}
	checkOneVersionPerStep(t, svcs[0], r)
}

// TestRunRampsTwoInstances: RunRamps on two instances at once, the clock
// past every step: the ramp ends done with one version per step.
func TestRunRampsTwoInstances(t *testing.T) {
	clock := newTestClock()
	svcs := openServices(t, 2, clock.clock())
	mustCreate(t, svcs[0], onOff("f", 2, 200))
	r := mustRamp(t, svcs[0], "f", ramp.Spec{Bucket: "on", Shares: fiveSteps, Every: time.Hour})
	clock.Add(5 * time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, svc := range svcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			svc.RunRamps(ctx, 5*time.Millisecond, func(err error) { t.Errorf("RunRamps: %v", err) })
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for rampOf(t, svcs[1], r).State != ramp.Done && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	checkOneVersionPerStep(t, svcs[1], r)
}

func checkOneVersionPerStep(t *testing.T, svc *rollout.Service, r ramp.Ramp) {
	t.Helper()
	vs, err := svc.Versions(context.Background(), r.Feature, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := len(vs) - 2; i >= 0; i-- {
		// The summary names the step, then what it did in percentages.
		step, _, _ := strings.Cut(vs[i].Summary, "; ")
		got = append(got, vs[i].Actor+": "+step)
	}
	var want []string
	for i, s := range r.Steps {
		want = append(want, fmt.Sprintf("%s: ramp on: step %d of %d, %g %%", ramp.ActorFor(r), i+1, len(r.Steps), 100*s.Share))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("history after creation:\n%s\nwant one version per step:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if st := rampOf(t, svc, r); st.State != ramp.Done {
		t.Errorf("ramp is %s (%s), want done", st.State, st.Reason)
	}
}

// TestRampPauses: a step over max_churn, or one that meets a feature
// changed by hand in a way the ramp cannot continue from, pauses the ramp
// with the reason and changes nothing; resume, pause and cancel move the
// ramp between states and refuse the moves that make no sense.
func TestRampPauses(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		spec   ramp.Spec
		hand   change.Change // made before the first step is due
		reason string
	}{
		{"over max_churn", ramp.Spec{Bucket: "on", Shares: []float64{0.5}, MaxChurn: ptr(0.2)}, change.Change{}, "more than max_churn"},
		{"bucket removed", ramp.Spec{Bucket: "on", Shares: []float64{0.5}}, change.RemoveBucket("on"), `bucket "on" was removed`},
		{"replicas lowered", ramp.Spec{Bucket: "on", Shares: []float64{0.5}}, change.UpdateBucket("on", ptr(1), nil), "fewer than the 5 of the ramp's last step"},
		{"replicas raised in a ramp down", ramp.Spec{Bucket: "on", Shares: []float64{0.01}}, change.UpdateBucket("on", ptr(50), nil), "more than the 5 of the ramp's last step"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newTestClock()
			svc := openServices(t, 1, clock.clock())[0]
			mustCreate(t, svc, onOff("f", 5, 100))
			tt.spec.Start = clock.Now().Add(time.Hour)
			r := mustRamp(t, svc, "f", tt.spec)
			if tt.hand.Summary() != "" {
				mustChange(t, svc, "f", tt.hand)
			}
			before, _ := svc.Snapshot().Feature("f")
			clock.Add(time.Hour)
			if n, err := svc.ApplyDueRamps(ctx); n != 0 || err != nil {
				t.Fatalf("ApplyDueRamps = %d, %v; want 0, nil", n, err)
			}
			got := rampOf(t, svc, r)
			if got.State != ramp.Paused || !strings.Contains(got.Reason, tt.reason) || got.Next != 0 {
				t.Errorf("ramp %s at step %d, reason %q; want paused at 0, the reason containing %q", got.State, got.Next, got.Reason, tt.reason)
			}
			if after, _ := svc.Snapshot().Feature("f"); after.Version != before.Version {
				t.Errorf("the feature moved from version %d to %d, want no change", before.Version, after.Version)
			}
			// Resumed, the step meets the same problem and pauses again.
			if _, err := svc.ResumeRamp(ctx, "f", r.ID, rollout.RampOptions{Actor: "bob"}); err != nil {
				t.Fatalf("ResumeRamp = %v", err)
			}
			svc.ApplyDueRamps(ctx)
			if got := rampOf(t, svc, r); got.State != ramp.Paused {
				t.Errorf("resumed and run again: %s, want paused", got.State)
			}
			if _, err := svc.CancelRamp(ctx, "f", r.ID, rollout.RampOptions{Actor: "ops"}); err != nil {
				t.Fatalf("CancelRamp = %v", err)
			}
			_, err := svc.ResumeRamp(ctx, "f", r.ID, rollout.RampOptions{Actor: "bob"})
			wantErrorCode(t, "ResumeRamp(canceled)", err, feature.EConflict)
		})
	}
}

func wantErrorCode(t *testing.T, call string, err error, code string) {
	t.Helper()
	if got := feature.ErrorCode(err); err == nil || got != code {
		t.Errorf("%s = %v (code %q), want code %q", call, err, got, code)
	}
}

// TestRampPauseResume: a paused ramp applies nothing; resumed, its due
// steps apply one after the other; a step whose share the bucket already
// has (grown by hand) is passed without a version.
func TestRampPauseResume(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	svc := openServices(t, 1, clock.clock())[0]
	mustCreate(t, svc, onOff("f", 2, 200))
	r := mustRamp(t, svc, "f", ramp.Spec{Bucket: "on", Shares: []float64{0.1, 0.2, 0.4}, Every: time.Hour})
	if _, err := svc.ApplyDueRamps(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.PauseRamp(ctx, "f", r.ID, rollout.RampOptions{Actor: "ops"}); err != nil {
		t.Fatalf("PauseRamp = %v", err)
	}
	_, err := svc.PauseRamp(ctx, "f", r.ID, rollout.RampOptions{Actor: "ops"})
	wantErrorCode(t, "PauseRamp(paused)", err, feature.EConflict)
	if got := rampOf(t, svc, r); got.Reason != "paused by ops" {
		t.Errorf("reason %q, want %q", got.Reason, "paused by ops")
	}
	clock.Add(3 * time.Hour)
	if n, _ := svc.ApplyDueRamps(ctx); n != 0 {
		t.Errorf("paused: ApplyDueRamps = %d, want 0", n)
	}
	// By hand, on grows past step 2's share.
	p, _, err := svc.Plan("f", map[string]float64{"on": 0.3, "off": 0.7}, plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cur, _ := svc.Snapshot().Feature("f")
	onNow, _ := cur.Bucket("on")
	planned := p.Buckets[0].Replicas
	if planned <= onNow.Replicas {
		t.Fatalf("plan gives on %d replicas, not more than %d", planned, onNow.Replicas)
	}
	mustChange(t, svc, "f", change.UpdateBucket("on", &planned, nil))
	if _, err := svc.ResumeRamp(ctx, "f", r.ID, rollout.RampOptions{Actor: "bob"}); err != nil {
		t.Fatalf("ResumeRamp = %v", err)
	}
	if n, err := svc.ApplyDueRamps(ctx); n != 1 || err != nil {
		t.Fatalf("resumed: ApplyDueRamps = %d, %v; want 1 (step 2 passes without a change), nil", n, err)
	}
	got := rampOf(t, svc, r)
	if got.State != ramp.Done || got.Steps[1].Version != 0 || got.Steps[1].Applied == nil || got.Steps[2].Version == 0 {
		t.Errorf("ramp %s, steps %+v; want done, step 2 passed without a version, step 3 with one", got.State, got.Steps)
	}
	_, err = svc.CancelRamp(ctx, "f", r.ID, rollout.RampOptions{Actor: "ops"})
	wantErrorCode(t, "CancelRamp(done)", err, feature.EConflict)
}

// TestCreateRampRefuses: what a new ramp may not ask for.
func TestCreateRampRefuses(t *testing.T) {
	clock := newTestClock()
	svc := openServices(t, 1, clock.clock())[0]
	mustCreate(t, svc, onOff("f", 100, 100))
	now := clock.Now()
	tests := []struct {
		name, key string
		spec      ramp.Spec
		code      string
	}{
		{"no feature", "nope", ramp.Spec{Bucket: "on", Shares: []float64{1}}, feature.ENotFound},
		{"no bucket", "f", ramp.Spec{Bucket: "blue", Shares: []float64{1}}, feature.ENotFound},
		{"no steps", "f", ramp.Spec{Bucket: "on"}, feature.EInvalid},
		{"not increasing", "f", ramp.Spec{Bucket: "on", Shares: []float64{0.6, 0.6}, Every: time.Hour}, feature.EInvalid},
		{"above 1", "f", ramp.Spec{Bucket: "on", Shares: []float64{0.6, 1.5}, Every: time.Hour}, feature.EInvalid},
		{"zero", "f", ramp.Spec{Bucket: "on", Shares: []float64{0, 0.6}, Every: time.Hour}, feature.EInvalid},
		{"no every", "f", ramp.Spec{Bucket: "on", Shares: []float64{0.6, 0.7}}, feature.EInvalid},
		{"times not increasing", "f", ramp.Spec{Bucket: "on", Shares: []float64{0.6, 0.7}, At: []time.Time{now, now}}, feature.EInvalid},
		{"times and every", "f", ramp.Spec{Bucket: "on", Shares: []float64{0.6, 0.7}, At: []time.Time{now, now.Add(1)}, Every: time.Hour}, feature.EInvalid},
		{"one time for two steps", "f", ramp.Spec{Bucket: "on", Shares: []float64{0.6, 0.7}, At: []time.Time{now}}, feature.EInvalid},
		{"share reached already", "f", ramp.Spec{Bucket: "on", Shares: []float64{0.2, 0.4}, Every: time.Hour}, feature.EInvalid},
		{"bad max_churn", "f", ramp.Spec{Bucket: "on", Shares: []float64{1}, MaxChurn: ptr(-0.1)}, feature.EInvalid},
		{"every overflows", "f", ramp.Spec{Bucket: "on", Shares: []float64{0.6, 0.8, 1}, Every: math.MaxInt64 / 2}, feature.EInvalid},
		{"last step beyond the horizon", "f", ramp.Spec{Bucket: "on", Shares: []float64{0.6, 1}, Every: ramp.MaxHorizon, Start: now.Add(time.Hour)}, feature.EInvalid},
		{"start in 9999", "f", ramp.Spec{Bucket: "on", Shares: []float64{0.6, 1}, Every: time.Hour, Start: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)}, feature.EInvalid},
		{"at in 9999", "f", ramp.Spec{Bucket: "on", Shares: []float64{1}, At: []time.Time{time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)}}, feature.EInvalid},
		{"start before year 1", "f", ramp.Spec{Bucket: "on", Shares: []float64{1}, Start: time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)}, feature.EInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := svc.CreateRamp(context.Background(), tt.key, tt.spec, "")
			wantErrorCode(t, "CreateRamp", err, tt.code)
		})
	}
	mustRamp(t, svc, "f", ramp.Spec{Bucket: "on", Shares: []float64{0.6, 1}, At: []time.Time{now.Add(time.Hour), now.Add(2 * time.Hour)}})
	_, err := svc.CreateRamp(context.Background(), "f", ramp.Spec{Bucket: "off", Shares: []float64{1}}, "")
	wantErrorCode(t, "CreateRamp(second live ramp)", err, feature.EConflict)
}

// TestRampFeatureArchived: the ramp of an archived feature pauses; once
// the feature is restored, the paused ramp may be canceled for a new one;
// a purge removes the feature's ramps, so the key may ramp again.
func TestRampFeatureArchived(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	svc := openServices(t, 1, clock.clock())[0]
	mustCreate(t, svc, onOff("f", 2, 100))
	r := mustRamp(t, svc, "f", ramp.Spec{Bucket: "on", Shares: []float64{0.5}, Start: clock.Now().Add(time.Hour)})
	if _, err := svc.Archive(ctx, "f", rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	clock.Add(time.Hour)
	if n, err := svc.ApplyDueRamps(ctx); n != 0 || err != nil {
		t.Fatalf("ApplyDueRamps = %d, %v; want 0, nil", n, err)
	}
	if got := rampOf(t, svc, r); got.State != ramp.Paused || !strings.Contains(got.Reason, `feature "f" was archived`) {
		t.Errorf("ramp %s, reason %q; want paused, the feature archived", got.State, got.Reason)
	}
	if _, err := svc.Restore(ctx, "f", rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	spec := ramp.Spec{Bucket: "on", Shares: []float64{0.5}}
	_, err := svc.CreateRamp(ctx, "f", spec, "")
	wantErrorCode(t, "CreateRamp(beside the paused one)", err, feature.EConflict)
	if _, err := svc.CancelRamp(ctx, "f", r.ID, rollout.RampOptions{Actor: ""}); err != nil {
		t.Fatal(err)
	}
	mustRamp(t, svc, "f", spec)

	if _, err := svc.Archive(ctx, "f", rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := svc.Purge(ctx, "f", rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	if rs, err := svc.Ramps(ctx, ""); err != nil || len(rs) != 0 {
		t.Errorf("Ramps() after the purge = %v, %v; want none", rs, err)
	}
	mustCreate(t, svc, onOff("f", 2, 100))
	mustRamp(t, svc, "f", spec)
}

// TestRampLastStepDoneByHand: when the other buckets were removed by hand,
// the last step has nothing to do: the ramp ends without a version.
func TestRampLastStepDoneByHand(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	svc := openServices(t, 1, clock.clock())[0]
	mustCreate(t, svc, onOff("f", 2, 100))
	r := mustRamp(t, svc, "f", ramp.Spec{Bucket: "on", Shares: []float64{1}, Start: clock.Now().Add(time.Hour)})
	mustChange(t, svc, "f", change.RemoveBucket("off"))
	clock.Add(time.Hour)
	if n, err := svc.ApplyDueRamps(ctx); n != 0 || err != nil {
		t.Fatalf("ApplyDueRamps = %d, %v; want 0, nil", n, err)
	}
	got := rampOf(t, svc, r)
	if got.State != ramp.Done || got.Steps[0].Version != 0 || got.Steps[0].Applied == nil {
		t.Errorf("ramp %s, step %+v; want done, the step passed without a version", got.State, got.Steps[0])
	}
	if f, _ := svc.Snapshot().Feature("f"); f.Version != 2 {
		t.Errorf("feature at version %d, want 2 (created, removed off)", f.Version)
	}
}

// TestRampZeroAndDown: a ramp starts from a bucket at 0 replicas, its 100 %
// step keeps the other bucket at 0 replicas (the fallback stays), a ramp of
// that bucket from 0 % gives it users again, and a ramp down only removes
// replicas of its bucket (users move only out of it) down to 0 %. A ramp
// down of a bucket that serves everyone is refused.
func TestRampZeroAndDown(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	svc := openServices(t, 1, clock.clock())[0]
	f := onOff("f", 0, 2000)
	f.Fallback = "off"
	mustCreate(t, svc, f)
	run := func(spec ramp.Spec) {
		t.Helper()
		spec.Every, spec.Start = time.Hour, clock.Now()
		r := mustRamp(t, svc, "f", spec)
		for range spec.Shares {
			svc.ApplyDueRamps(ctx)
			clock.Add(time.Hour)
		}
		if got := rampOf(t, svc, r); got.State != ramp.Done {
			t.Fatalf("ramp %v: %s (%s), want done", spec.Shares, got.State, got.Reason)
		}
	}
	run(ramp.Spec{Bucket: "on", Shares: []float64{0.1, 0.5, 1}})
	full, _ := svc.Snapshot().Feature("f")
	if b, _ := full.Bucket("off"); b.Replicas != 0 || full.Fallback != "off" {
		t.Fatalf("at 100 %%: %v fallback %q, want off kept at 0 replicas and the fallback", full.Buckets, full.Fallback)
	}
	_, err := svc.CreateRamp(ctx, "f", ramp.Spec{Bucket: "on", Shares: []float64{0.5}}, "")
	wantErrorCode(t, "CreateRamp(down from 100 %)", err, feature.EInvalid)

	run(ramp.Spec{Bucket: "off", Shares: []float64{0.3, 0.5}})
	half, _ := svc.Snapshot().Feature("f")
	if on, _ := half.Bucket("on"); on.Replicas != mustBucket(t, full, "on").Replicas {
		t.Errorf("ramping off up changed on: %v", half.Buckets)
	}
	run(ramp.Spec{Bucket: "off", Shares: []float64{0.2, 0}})
	end, _ := svc.Snapshot().Feature("f")
	if off, _ := end.Bucket("off"); off.Replicas != 0 {
		t.Errorf("after ramping off down to 0: %v", end.Buckets)
	}
	rep := rollout.NewReport(half, end)
	for _, m := range rep.Moves {
		if m.From != "off" || m.To != "on" {
			t.Errorf("ramping off down moves %+v, want only off → on", m)
		}
	}
	if math.Abs(rep.Churn-rep.SharesBefore["off"]) > 1e-12 {
		t.Errorf("ramping off down moved %v, want its whole share %v", rep.Churn, rep.SharesBefore["off"])
	}
}

func mustBucket(t *testing.T, f feature.Feature, name string) feature.Bucket {
	t.Helper()
	b, ok := f.Bucket(name)
	if !ok {
		t.Fatalf("feature %s has no bucket %s", f.Key, name)
	}
	return b
}

// TestRampFineDefault: a ramp given no tolerance on a fine ring (at least
// ramp.FinePoints points) reaches each step within 0.05 points, up and then
// down, and its preview (a dry run) foresees exactly what the steps do; on
// a coarse ring the default stays 0.5 points.
func TestRampFineDefault(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	svc := openServices(t, 1, clock.clock())[0]
	mustCreate(t, svc, onOff("fine", 0, ramp.FinePoints))
	mustCreate(t, svc, onOff("coarse", 1, 300))
	if r := mustRamp(t, svc, "coarse", ramp.Spec{Bucket: "on", Shares: fiveSteps, Every: time.Hour}); r.Tolerance != plan.DefaultTolerance || r.FineDefault {
		t.Errorf("coarse ramp tolerance %v (fine default %v), want %v", r.Tolerance, r.FineDefault, plan.DefaultTolerance)
	} else if _, err := svc.CancelRamp(ctx, "coarse", r.ID, rollout.RampOptions{Actor: "pm"}); err != nil {
		t.Fatal(err)
	}
	run := func(shares []float64) {
		t.Helper()
		spec := ramp.Spec{Bucket: "on", Shares: shares, Every: time.Hour, Start: clock.Now(), Comment: "fine steps"}
		pre, err := svc.PreviewRamp(ctx, "fine", spec, "pm")
		if err != nil || len(pre.Steps) != len(shares) {
			t.Fatalf("PreviewRamp(%v) = %+v, %v", shares, pre, err)
		}
		if rs, _ := svc.Ramps(ctx, "fine"); len(rs) > 0 && rs[len(rs)-1].Live() {
			t.Fatalf("the preview stored a ramp: %+v", rs[len(rs)-1])
		}
		r := mustRamp(t, svc, "fine", spec)
		if r.Tolerance != plan.FineTolerance || !r.FineDefault || r.Comment != "fine steps" {
			t.Fatalf("fine ramp tolerance %v (fine default %v, comment %q), want %v", r.Tolerance, r.FineDefault, r.Comment, plan.FineTolerance)
		}
		for i, want := range shares {
			before, _ := svc.Snapshot().Feature("fine")
			if n, err := svc.ApplyDueRamps(ctx); n != 1 || err != nil {
				t.Fatalf("step %d: ApplyDueRamps = %d, %v (%s)", i+1, n, err, rampOf(t, svc, r).Reason)
			}
			clock.Add(time.Hour)
			shares, _ := svc.Snapshot().Shares("fine")
			if math.Abs(shares["on"]-want) > plan.FineTolerance+1e-12 {
				t.Errorf("step %d: on's share %.5f, want %.5f within 0.05 points", i+1, shares["on"], want)
			}
			after, _ := svc.Snapshot().Feature("fine")
			p := pre.Steps[i]
			if p.Error != "" || math.Abs(p.Reached-shares["on"]) > 1e-12 || math.Abs(p.Churn-rollout.NewReport(before, after).Churn) > 1e-12 {
				t.Errorf("step %d preview %+v; the step reached %v, moved %v", i+1, p, shares["on"], rollout.NewReport(before, after).Churn)
			}
		}
		if got := rampOf(t, svc, r); got.State != ramp.Done {
			t.Fatalf("ramp %v: %s (%s), want done", shares, got.State, got.Reason)
		}
	}
	run([]float64{0.0123, 0.1, 0.3333, 0.5})
	run([]float64{0.25, 0.0777, 0.001})
}
