package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/schedule"
)

// newSchedule returns a pending schedule of f, due at at.
func newSchedule(id string, f feature.Feature, at time.Time) schedule.Schedule {
	return schedule.Schedule{
		ID: id, Feature: f.Key, FeatureID: f.ID, Environment: rollout.Production, At: at,
		Change:  schedule.Change{Kind: schedule.KindPatch, Body: []byte(`{"enabled":false}`)},
		Summary: "disabled", Actor: "ed", Status: schedule.Pending, CreatedAt: t0, BaseVersion: f.Version,
	}
}

func createSchedule(t *testing.T, s Store, sc schedule.Schedule) {
	t.Helper()
	if err := s.CreateSchedule(context.Background(), sc); err != nil {
		t.Fatalf("CreateSchedule(%s) = %v", sc.ID, err)
	}
}

// scheduleIDs lists the schedules q selects as "id status" each.
func scheduleIDs(t *testing.T, s Store, q schedule.Query) []string {
	t.Helper()
	scs, err := s.Schedules(context.Background(), q)
	if err != nil {
		t.Fatalf("Schedules(%+v) = %v", q, err)
	}
	out := []string{}
	for _, sc := range scs {
		out = append(out, sc.ID+" "+string(sc.Status))
	}
	return out
}

// testSchedules: schedules are listed pending soonest first, then the
// others latest first; a due one is claimed by one caller of many, and
// finished (with its feature's version) only under its claim; a claim
// whose claimant vanished lapses; cancel needs a pending schedule of the
// feature named; archiving cancels the pending ones; each step is audited.
func testSchedules(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	f := newFeature("f")
	create(t, s, f)
	other := newFeature("other")
	create(t, s, other)
	now := t0.Add(time.Hour)
	createSchedule(t, s, newSchedule("s1", f, now.Add(-time.Minute)))
	createSchedule(t, s, newSchedule("s2", f, now.Add(time.Minute)))
	createSchedule(t, s, newSchedule("s3", f, now.Add(-2*time.Minute)))
	createSchedule(t, s, newSchedule("o1", other, now.Add(-time.Hour)))
	wantCode(t, "CreateSchedule(same ID)", s.CreateSchedule(ctx, newSchedule("s1", f, now)), feature.EConflict)
	if got, want := fmt.Sprint(scheduleIDs(t, s, schedule.Query{Feature: "f"})), "[s3 pending s1 pending s2 pending]"; got != want {
		t.Errorf("Schedules(f) = %s, want %s", got, want)
	}
	if _, err := s.Schedule(ctx, "nope"); feature.ErrorCode(err) != feature.ENotFound {
		t.Errorf("Schedule(nope) = %v, want not found", err)
	}
	if o.In != nil {
		if got := scheduleIDs(t, o.In("staging"), schedule.Query{}); len(got) != 0 {
			t.Errorf("Schedules in staging = %v, want none: schedules are their environment's", got)
		}
	}

	// Cancel: another feature's ID is not found; twice is a conflict.
	if _, err := s.CancelSchedule(ctx, "other", "s2", "ada", "by hand", now); feature.ErrorCode(err) != feature.ENotFound {
		t.Errorf("CancelSchedule(other's key, s2) = %v, want not found", err)
	}
	if sc, err := s.CancelSchedule(ctx, "f", "s2", "ada", "by hand", now); err != nil || sc.Status != schedule.Canceled || sc.DoneBy != "ada" {
		t.Errorf("CancelSchedule(f, s2) = %+v, %v; want canceled by ada", sc, err)
	}
	if _, err := s.CancelSchedule(ctx, "f", "s2", "ada", "by hand", now); feature.ErrorCode(err) != feature.EConflict {
		t.Errorf("CancelSchedule(canceled) = %v, want a conflict", err)
	}

	// Two handles, as two instances, claim at once: each due schedule
	// goes to exactly one (s2, canceled, and none not due).
	handles := []Store{s, o.Open(t)}
	claimed := make([][]schedule.Schedule, 6)
	errs := make([]error, len(claimed))
	var wg sync.WaitGroup
	for i := range claimed {
		wg.Go(func() {
			claimed[i], errs[i] = handles[i%2].ClaimDueSchedules(ctx, fmt.Sprint("claim", i), now, 10)
		})
	}
	wg.Wait()
	owner := map[string]schedule.Schedule{}
	for i, cs := range claimed {
		if errs[i] != nil {
			t.Fatalf("ClaimDueSchedules (racer %d) = %v", i, errs[i])
		}
		for _, sc := range cs {
			if prev, ok := owner[sc.ID]; ok {
				t.Errorf("schedule %s claimed twice: by %s and %s", sc.ID, prev.Claim, sc.Claim)
			}
			if sc.Status != schedule.Running || sc.Claim != fmt.Sprint("claim", i) {
				t.Errorf("claimed schedule %s is %s under %q, want running under claim%d", sc.ID, sc.Status, sc.Claim, i)
			}
			owner[sc.ID] = sc
		}
	}
	if len(owner) != 3 || owner["s1"].ID == "" || owner["s3"].ID == "" || owner["o1"].ID == "" {
		t.Fatalf("claimed %v, want s1, s3 and o1", owner)
	}
	if cs, err := s.ClaimDueSchedules(ctx, "late", now, 10); err != nil || len(cs) != 0 {
		t.Errorf("ClaimDueSchedules again = %v, %v; want none: all are claimed", cs, err)
	}
	if _, err := s.CancelSchedule(ctx, "f", "s1", "ada", "", now); feature.ErrorCode(err) != feature.EConflict {
		t.Errorf("CancelSchedule(running) = %v, want a conflict", err)
	}

	// s1 applies with the feature's next version; only its claim may
	// finish it, once.
	g := next(f)
	v := versionOf(g)
	v.Kind, v.Subject = audit.ScheduleApply, "s1"
	done := owner["s1"]
	done.Status, done.Version = schedule.Applied, g.Version
	wrong := done
	wrong.Claim = "someone else"
	wantCode(t, "FinishSchedule(another claim)", s.FinishSchedule(ctx, wrong, &g, &v), feature.EConflict)
	wantFeature(t, s, f)
	if err := s.FinishSchedule(ctx, done, &g, &v); err != nil {
		t.Fatalf("FinishSchedule(s1) = %v", err)
	}
	wantFeature(t, s, g)
	wantCode(t, "FinishSchedule(s1 again)", s.FinishSchedule(ctx, done, &g, &v), feature.EConflict)
	if sc, err := s.Schedule(ctx, "s1"); err != nil || sc.Status != schedule.Applied || sc.Version != 2 || sc.Claim != "" {
		t.Errorf("Schedule(s1) = %+v, %v; want applied, version 2", sc, err)
	}
	// A stale feature: neither is written.
	stale := owner["s3"]
	stale.Status = schedule.Applied
	wantCode(t, "FinishSchedule(stale feature)", s.FinishSchedule(ctx, stale, &g, &v), feature.EConflict)
	if sc, _ := s.Schedule(ctx, "s3"); sc.Status != schedule.Running {
		t.Errorf("after a stale write, s3 is %s, want still running", sc.Status)
	}
	// s3 fails.
	failed := owner["s3"]
	failed.Status, failed.Reason = schedule.Failed, "over max_churn"
	if err := s.FinishSchedule(ctx, failed, nil, nil); err != nil {
		t.Fatalf("FinishSchedule(s3 failed) = %v", err)
	}

	// o1's claimant vanished: after the lease another claims it, and the
	// first can no longer finish it.
	if cs, err := s.ClaimDueSchedules(ctx, "early", now.Add(schedule.Lease/2), 10); err != nil || len(cs) != 0 {
		t.Errorf("ClaimDueSchedules before the lease ends = %v, %v; want none", cs, err)
	}
	cs, err := s.ClaimDueSchedules(ctx, "second", now.Add(schedule.Lease+time.Second), 10)
	if err != nil || len(cs) != 1 || cs[0].ID != "o1" || cs[0].Claim != "second" {
		t.Fatalf("ClaimDueSchedules after the lease = %+v, %v; want o1 under claim second", cs, err)
	}
	lapsed := owner["o1"]
	lapsed.Status = schedule.Failed
	wantCode(t, "FinishSchedule(lapsed claim)", s.FinishSchedule(ctx, lapsed, nil, nil), feature.EConflict)

	// Archiving f cancels its pending schedule s4, with an event.
	createSchedule(t, s, newSchedule("s4", g, now.Add(time.Hour)))
	if err := s.ArchiveFeature(ctx, "f", 2, audit.Event{Actor: "ada", Kind: audit.Archive, Time: now}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(scheduleIDs(t, s, schedule.Query{Feature: "f"})), "[s4 canceled s2 canceled s1 applied s3 failed]"; got != want {
		t.Errorf("Schedules(f) after the archive = %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(scheduleIDs(t, s, schedule.Query{Status: schedule.Running})), "[o1 running]"; got != want {
		t.Errorf("Schedules(running) = %s, want %s", got, want)
	}
	wantKinds(t, s, audit.Query{Feature: "f", Ascending: true},
		"create f", "schedule_create fs1", "schedule_create fs2", "schedule_create fs3",
		"schedule_cancel fs2", "schedule_apply fs1", "schedule_fail fs3", "schedule_create fs4", "archive f", "schedule_cancel fs4")
	if err := s.PurgeFeature(ctx, "f", audit.Event{Actor: "ada"}, nil); err != nil {
		t.Fatal(err)
	}
	if got := scheduleIDs(t, s, schedule.Query{Feature: "f"}); len(got) != 0 {
		t.Errorf("Schedules(f) after the purge = %v, want none", got)
	}
}

// testScheduleCaps: a feature has at most MaxPendingPerFeature pending
// schedules and an environment MaxPendingPerEnvironment; canceled ones do
// not count.
func testScheduleCaps(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	f := newFeature("f")
	create(t, s, f)
	g := newFeature("g")
	create(t, s, g)
	at := t0.Add(time.Hour)
	for i := range schedule.MaxPendingPerFeature {
		createSchedule(t, s, newSchedule(fmt.Sprint("f", i), f, at))
	}
	wantCode(t, "CreateSchedule(one too many for f)", s.CreateSchedule(ctx, newSchedule("f-over", f, at)), feature.EConflict)
	createSchedule(t, s, newSchedule("g0", g, at))
	if _, err := s.CancelSchedule(ctx, "f", "f0", "ada", "", at); err != nil {
		t.Fatal(err)
	}
	createSchedule(t, s, newSchedule("f-again", f, at))
	if o.Exec == nil {
		return
	}
	// Fill the environment to its cap with other features' schedules.
	fill := schedule.MaxPendingPerEnvironment - schedule.MaxPendingPerFeature - 1
	if err := o.Exec(t, fmt.Sprintf(`
		WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %d)
		INSERT INTO schedules (id, environment, feature_key, status, due_at, body, created_at)
		SELECT 'bulk-' || i, src.environment, 'k' || (i %% 500), 'pending', src.due_at, '{}', src.created_at
		FROM n, (SELECT environment, due_at, created_at FROM schedules WHERE id = 'g0') AS src`, fill)); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "CreateSchedule(one too many for the environment)", s.CreateSchedule(ctx, newSchedule("g-over", g, at)), feature.EConflict)
	if o.In != nil {
		// Staging's cap is its own.
		if err := o.In("staging").CreateSchedule(ctx, newSchedule("staging-1", g, at)); err != nil {
			t.Errorf("CreateSchedule in staging = %v, want room: the cap is per environment", err)
		}
	}
}
