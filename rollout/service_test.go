package rollout_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store"
	"github.com/rollout/rollout/store/sqlite"
)

// failingStore is the real store, with writes of counts that fail on demand.
type failingStore struct {
	*store.DB
	fail atomic.Bool
}

func (s *failingStore) AddExposures(ctx context.Context, counts []feature.Exposure) error {
	if s.fail.Load() {
		return feature.Errorf(feature.EUnavailable, "database unavailable (test)")
	}
	return s.DB.AddExposures(ctx, counts)
}

func newService(t *testing.T) (*rollout.Service, *failingStore) {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	fs := &failingStore{DB: db}
	svc, err := rollout.NewService(context.Background(), fs, nil)
	if err != nil {
		t.Fatal(err)
	}
	return svc, fs
}

func abc(key string) feature.Feature {
	return feature.Feature{Key: key, Enabled: true, Buckets: []feature.Bucket{{Name: "A", Replicas: 3}, {Name: "B", Replicas: 3}, {Name: "C", Replicas: 3}}}
}

func mustCreate(t *testing.T, svc *rollout.Service, f feature.Feature) {
	t.Helper()
	if _, err := svc.Create(context.Background(), f, rollout.ChangeOptions{}); err != nil {
		t.Fatalf("Create(%s): %v", f.Key, err)
	}
}

func mustChange(t *testing.T, svc *rollout.Service, key string, ch change.Change) rollout.Result {
	t.Helper()
	res, err := svc.Change(context.Background(), key, ch, rollout.ChangeOptions{})
	if err != nil {
		t.Fatalf("Change(%s, %s): %v", key, ch.Summary(), err)
	}
	return res
}

func ptr[T any](v T) *T { return &v }

func TestReports(t *testing.T) {
	svc, _ := newService(t)
	mustCreate(t, svc, abc("f"))
	shares, _ := svc.Snapshot().Shares("f")

	tests := []struct {
		name      string
		change    change.Change
		churn     float64
		moves     map[string]float64 // "from->to"
		overrides int
	}{
		{"value change moves nobody", change.UpdateBucket("A", nil, []byte(`{"x":1}`)), 0, map[string]float64{}, 0},
		{"disable with fallback A moves everyone else into A", change.Patch(nil, ptr(false), ptr("A")),
			1 - shares["A"], map[string]float64{"B->A": shares["B"], "C->A": shares["C"]}, 0},
		{"clearing the fallback moves everyone to no bucket", change.Patch(nil, nil, ptr("")),
			1, map[string]float64{"A->": 1}, 0},
		{"enabling serves the ring again", change.Patch(nil, ptr(true), nil),
			1, map[string]float64{"->A": shares["A"], "->B": shares["B"], "->C": shares["C"]}, 0},
		{"an override moves one user, outside the fractions", change.SetOverride("user1", "A"), 0, map[string]float64{}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := mustChange(t, svc, "f", tt.change).Report
			if math.Abs(rep.Churn-tt.churn) > 1e-12 {
				t.Errorf("Churn = %v, want %v", rep.Churn, tt.churn)
			}
			got := map[string]float64{}
			for _, m := range rep.Moves {
				got[m.From+"->"+m.To] = m.Share
			}
			if diff := cmp.Diff(tt.moves, got, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
				t.Errorf("Moves (-want +got):\n%s", diff)
			}
			if len(rep.OverrideChanges) != tt.overrides {
				t.Errorf("OverrideChanges = %v, want %d", rep.OverrideChanges, tt.overrides)
			}
		})
	}
}

func TestEvaluateDoesNotAllocate(t *testing.T) {
	svc, _ := newService(t)
	mustCreate(t, svc, abc("checkout"))
	snap := svc.Snapshot()
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := snap.Evaluate("checkout", "user-12345"); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Evaluate allocates %v times per call, want 0", allocs)
	}
}

// TestHistoryReportsMatchRecomputing applies random changes, then checks
// every stored report against one recomputed from the stored configurations,
// and that rolling back to any version restores every user's bucket.
func TestHistoryReportsMatchRecomputing(t *testing.T) {
	svc, _ := newService(t)
	ctx := context.Background()
	mustCreate(t, svc, abc("f"))
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"A", "B", "C", "D", "E", "F"}
	for range 30 {
		cur, _ := svc.Snapshot().Feature("f")
		name := names[rng.IntN(len(names))]
		var ch change.Change
		switch _, exists := cur.Bucket(name); {
		case !exists:
			ch = change.AddBucket(feature.Bucket{Name: name, Replicas: 1 + rng.IntN(50)})
		case rng.IntN(3) == 0 && len(cur.Buckets) > 1 && cur.Fallback != name:
			ch = change.RemoveBucket(name)
		case rng.IntN(5) == 0:
			ch = change.Patch(nil, ptr(!cur.Enabled), ptr(cur.Buckets[0].Name))
		default:
			ch = change.UpdateBucket(name, ptr(1+rng.IntN(100)), nil)
		}
		if _, err := svc.Change(ctx, "f", ch, rollout.ChangeOptions{}); err != nil && feature.ErrorCode(err) != feature.EConflict {
			t.Fatalf("%s: %v", ch.Summary(), err)
		}
	}
	versions, err := svc.Versions(ctx, "f", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(versions); i++ {
		after, before := versions[i], versions[i+1]
		if after.Version != before.Version+1 {
			t.Fatalf("versions %d and %d are not contiguous", before.Version, after.Version)
		}
		want := rollout.NewReport(before.Config, after.Config)
		if diff := cmp.Diff(want, after.Report); diff != "" {
			t.Errorf("version %d: stored report differs from recomputing it (-want +got):\n%s", after.Version, diff)
		}
	}

	users := make([]string, 500)
	for i := range users {
		users[i] = fmt.Sprint("user-", i)
	}
	for _, n := range []int{1, 7, 19} {
		res, err := svc.Rollback(ctx, "f", n, rollout.ChangeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		history, _ := svc.Version(ctx, "f", n)
		for _, u := range users {
			got, _ := svc.Evaluate("f", u)
			if wantBucket := bucketAt(t, history.Config, u); got.Bucket != wantBucket {
				t.Fatalf("after rollback to %d (version %d), %s is in %q, want %q", n, res.Feature.Version, u, got.Bucket, wantBucket)
			}
		}
	}
}

// bucketAt evaluates user against configuration f through a service of its
// own, as a second opinion.
func bucketAt(t *testing.T, f feature.Feature, user string) string {
	t.Helper()
	if !f.Enabled {
		return f.Fallback
	}
	if b, ok := f.Overrides[user]; ok {
		return b
	}
	key := user
	if f.Salt != "" {
		key = f.Salt + ":" + user
	}
	b, _ := f.Ring().Lookup(key)
	return b
}

// TestEvaluationDuringWrites evaluates from many goroutines while a writer
// changes the feature: every answer is consistent with its version.
func TestEvaluationDuringWrites(t *testing.T) {
	svc, _ := newService(t)
	ctx := context.Background()
	mustCreate(t, svc, abc("f"))
	var wg sync.WaitGroup
	done := make(chan struct{})
	var bad atomic.Int64
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				// Version 1 has A, B, C; even versions add D, odd ones remove it.
				e, err := svc.Evaluate("f", fmt.Sprint(g, "-", i))
				if err != nil || e.Bucket == "" || (e.Bucket == "D" && e.Version%2 == 1) {
					bad.Add(1)
				}
			}
		}()
	}
	for range 20 {
		mustChange(t, svc, "f", change.AddBucket(feature.Bucket{Name: "D", Replicas: 50}))
		mustChange(t, svc, "f", change.RemoveBucket("D"))
	}
	close(done)
	wg.Wait()
	if n := bad.Load(); n > 0 {
		t.Errorf("%d evaluations were inconsistent with their version", n)
	}
	if _, err := svc.Versions(ctx, "f", 0, 0); err != nil {
		t.Fatal(err)
	}
}

// TestExposureFlushKeepsCountsOnFailure: counts that could not be written
// are written by the next flush; none are lost or doubled.
func TestExposureFlushKeepsCountsOnFailure(t *testing.T) {
	svc, fs := newService(t)
	ctx := context.Background()
	mustCreate(t, svc, abc("f"))
	for i := range 100 {
		svc.Evaluate("f", fmt.Sprint(i))
	}
	fs.fail.Store(true)
	if err := svc.FlushExposures(ctx); feature.ErrorCode(err) != feature.EUnavailable {
		t.Fatalf("FlushExposures with the database down = %v, want unavailable", err)
	}
	for i := range 50 {
		svc.Evaluate("f", fmt.Sprint(i))
	}
	// A change retires version 1 while its counts are still in memory.
	mustChange(t, svc, "f", change.AddBucket(feature.Bucket{Name: "D", Replicas: 3}))
	svc.Evaluate("f", "x")
	fs.fail.Store(false)
	if err := svc.FlushExposures(ctx); err != nil {
		t.Fatal(err)
	}
	if err := svc.FlushExposures(ctx); err != nil {
		t.Fatal(err)
	}
	stored, err := fs.DB.Exposures(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	byVersion := map[int]int64{}
	for _, e := range stored {
		byVersion[e.Version] += e.Count
	}
	if byVersion[1] != 150 || byVersion[2] != 1 {
		t.Errorf("stored counts by version = %v, want 150 at version 1 and 1 at version 2", byVersion)
	}
}

func TestGuards(t *testing.T) {
	svc, _ := newService(t)
	ctx := context.Background()
	mustCreate(t, svc, abc("f"))
	addD := change.AddBucket(feature.Bucket{Name: "D", Replicas: 3})

	_, err := svc.Change(ctx, "f", addD, rollout.ChangeOptions{MaxChurn: ptr(0.2)})
	var e *feature.Error
	if !errors.As(err, &e) || e.Code != feature.EChurn || e.Report == nil || math.Abs(e.Report.Churn-0.2226766) > 1e-7 {
		t.Fatalf("max_churn 0.2: err = %v, want max_churn_exceeded with the report", err)
	}
	v1, _ := svc.Snapshot().Feature("f")
	stale := v1
	stale.Version = 2
	if _, err := svc.Change(ctx, "f", addD, rollout.ChangeOptions{IfMatch: stale.Tag()}); feature.ErrorCode(err) != feature.EPrecondition {
		t.Fatalf("If-Match 2 on version 1: err = %v, want precondition_failed", err)
	}
	res, err := svc.Change(ctx, "f", addD, rollout.ChangeOptions{DryRun: true})
	if err != nil || res.Feature.Version != 2 {
		t.Fatalf("dry run: %v, %v", res.Feature.Version, err)
	}
	if f, _ := svc.Snapshot().Feature("f"); f.Version != 1 {
		t.Fatalf("after refused and dry-run changes the feature is at version %d, want 1", f.Version)
	}
	if _, err := svc.Change(ctx, "f", addD, rollout.ChangeOptions{IfMatch: v1.Tag(), MaxChurn: ptr(0.25), Actor: "ci"}); err != nil {
		t.Fatal(err)
	}
	v, _ := svc.Version(ctx, "f", 2)
	if v.Actor != "ci" {
		t.Errorf("actor = %q, want ci", v.Actor)
	}
}

// TestPeekIsNotCounted: looking at what a user gets (the dashboard's sample
// and user look-up) serves the same answer as Evaluate but is not counted
// among the exposures apps are observed to get.
func TestPeekIsNotCounted(t *testing.T) {
	svc, _ := newService(t)
	ctx := context.Background()
	mustCreate(t, svc, abc("f"))
	for i := range 100 {
		u := fmt.Sprint("user:", i)
		peek, err := svc.Snapshot().Peek("f", u)
		if err != nil {
			t.Fatal(err)
		}
		if e, _ := svc.Evaluate("f", u); !cmp.Equal(e, peek) {
			t.Fatalf("Peek(%s) = %+v, Evaluate = %+v", u, peek, e)
		}
	}
	rep, err := svc.Exposures(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total != 100 {
		t.Errorf("exposures after 100 evaluations and 100 peeks = %d, want 100", rep.Total)
	}
	if _, err := svc.Snapshot().Peek("nope", "u"); feature.ErrorCode(err) != feature.ENotFound {
		t.Errorf("Peek(nope) err = %v, want not_found", err)
	}
}

// TestGuardsOnEveryChange: create and delete honour dry runs, max_churn and
// If-Match like every other change.
func TestGuardsOnEveryChange(t *testing.T) {
	svc, _ := newService(t)
	ctx := context.Background()

	// Create: the report moves everyone from no bucket into the feature.
	_, err := svc.Create(ctx, abc("f"), rollout.ChangeOptions{MaxChurn: ptr(0.5)})
	if feature.ErrorCode(err) != feature.EChurn {
		t.Fatalf("Create with max_churn 0.5: err = %v, want %s", err, feature.EChurn)
	}
	if _, err := svc.Create(ctx, abc("f"), rollout.ChangeOptions{IfMatch: "*"}); feature.ErrorCode(err) != feature.EPrecondition {
		t.Fatalf("Create with If-Match: err = %v, want %s", err, feature.EPrecondition)
	}
	if _, ok := svc.Snapshot().Feature("f"); ok {
		t.Fatal("a refused create made the feature")
	}
	mustCreate(t, svc, abc("f"))
	before, _ := svc.Snapshot().Feature("f")

	// Delete: a dry run reports that everyone loses their bucket and keeps
	// the feature; max_churn and a stale tag refuse it.
	res, err := svc.Archive(ctx, "f", rollout.ChangeOptions{DryRun: true})
	if err != nil || !res.DryRun || res.Report.Churn != 1 || len(res.Report.SharesAfter) != 0 {
		t.Fatalf("Delete dry run = %+v, %v; want churn 1 and no shares after", res.Report, err)
	}
	if _, err := svc.Archive(ctx, "f", rollout.ChangeOptions{MaxChurn: ptr(0.99)}); feature.ErrorCode(err) != feature.EChurn {
		t.Fatalf("Delete with max_churn 0.99: err = %v, want %s", err, feature.EChurn)
	}
	mustChange(t, svc, "f", change.Patch(ptr("described"), nil, nil))
	if _, err := svc.Archive(ctx, "f", rollout.ChangeOptions{IfMatch: before.Tag()}); feature.ErrorCode(err) != feature.EPrecondition {
		t.Fatalf("Delete with the tag of version 1 at version 2: err = %v, want %s", err, feature.EPrecondition)
	}
	if vs, err := svc.Versions(ctx, "f", 0, 0); err != nil || len(vs) != 2 {
		t.Fatalf("after refused deletes: %d versions, %v; want 2", len(vs), err)
	}

	// Deleted and created again, the feature's tags differ even at the
	// same version, so a tag of the old one never applies to the new.
	now, _ := svc.Snapshot().Feature("f")
	if _, err := svc.Archive(ctx, "f", rollout.ChangeOptions{IfMatch: now.Tag()}); err != nil {
		t.Fatal(err)
	}
	if err := svc.Purge(ctx, "f", rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, svc, abc("f"))
	again, _ := svc.Snapshot().Feature("f")
	if again.Version != before.Version || again.Tag() == before.Tag() {
		t.Fatalf("re-created feature: version %d tag %q; the old one's: version %d tag %q", again.Version, again.Tag(), before.Version, before.Tag())
	}
	_, err = svc.Change(ctx, "f", change.Patch(ptr("x"), nil, nil), rollout.ChangeOptions{IfMatch: before.Tag()})
	if feature.ErrorCode(err) != feature.EPrecondition || !strings.Contains(err.Error(), "deleted and created again") {
		t.Fatalf("change with the old feature's tag: err = %v, want %s saying it was re-created", err, feature.EPrecondition)
	}
}

// raceLostStore is the real store, whose CreateFeature meets a feature
// created elsewhere meanwhile, and whose reads of one feature then fail.
type raceLostStore struct {
	*store.DB
	readErr error
}

func (s *raceLostStore) CreateFeature(context.Context, feature.Feature, rollout.Version) error {
	return feature.Errorf(feature.EConflict, "feature exists (test)")
}

func (s *raceLostStore) Feature(context.Context, string) (feature.Feature, error) {
	return feature.Feature{}, s.readErr
}

// TestCreateConflictReloadFails: a create that loses the race to another
// instance is still a conflict, and when reading the winner's feature into
// the snapshot fails too, the error says so rather than dropping it.
func TestCreateConflictReloadFails(t *testing.T) {
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	readErr := feature.Errorf(feature.EUnavailable, "the database is busy (test)")
	svc, err := rollout.NewService(context.Background(), &raceLostStore{DB: db, readErr: readErr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = svc.Create(context.Background(), abc("f"), rollout.ChangeOptions{})
	if code := feature.ErrorCode(err); code != feature.EConflict {
		t.Errorf("Create that lost the race = %v (code %q), want %q", err, code, feature.EConflict)
	}
	if got, want := feature.ErrorMessage(err), "feature exists (test)"; got != want {
		t.Errorf("ErrorMessage(Create's error) = %q, want %q", got, want)
	}
	if !errors.Is(err, readErr) {
		t.Errorf("Create's error %q does not report the failed reload (%v)", err, readErr)
	}
}
