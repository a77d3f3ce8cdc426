package rollout_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store"
	"github.com/rollout/rollout/store/sqlite"
)

// twoInstances returns two services over one SQLite file, each with its
// own store handle, as two processes sharing a database have.
func twoInstances(t *testing.T) (one, two *rollout.Service, db2 *store.DB) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rollout.db")
	var svcs [2]*rollout.Service
	var dbs [2]*store.DB
	for i := range svcs {
		db, err := sqlite.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if svcs[i], err = rollout.NewService(ctx, db, nil); err != nil {
			t.Fatal(err)
		}
		dbs[i] = db
	}
	return svcs[0], svcs[1], dbs[1]
}

// TestSyncFollowsAnotherInstance: what one instance commits, the other
// takes in with Sync — creates, changes, deletes and token changes — and a
// change made against a stale snapshot lands on what the store holds.
func TestSyncFollowsAnotherInstance(t *testing.T) {
	ctx := context.Background()
	one, two, db2 := twoInstances(t)
	events, stop := two.Subscribe()
	defer stop()

	mustCreate(t, one, abc("f"))
	if _, ok := two.Snapshot().Feature("f"); ok {
		t.Fatal("instance two has f before syncing")
	}
	commits, err := two.Sync(ctx)
	if err != nil || len(commits) != 1 || commits[0].Kind != rollout.CommitFeature || commits[0].Key != "f" {
		t.Fatalf("Sync = %+v, %v; want one feature commit of f", commits, err)
	}
	if got := <-events; len(got) != 1 || got[0].Revision != two.Snapshot().Revision() {
		t.Fatalf("subscriber got %+v, want the commit at revision %d", got, two.Snapshot().Revision())
	}
	want, _ := one.Evaluate("f", "user-1")
	if got, err := two.Evaluate("f", "user-1"); err != nil || got.Bucket != want.Bucket || got.Version != 1 {
		t.Fatalf("instance two evaluates %+v, %v; want %+v", got, err, want)
	}
	if commits, _ := two.Sync(ctx); len(commits) != 0 {
		t.Fatalf("a second Sync took in %d commits, want none", len(commits))
	}

	// Instance two adds D; instance one, not synced, changes A without
	// If-Match: its change lands on version 2, keeping D.
	mustChange(t, two, "f", change.AddBucket(feature.Bucket{Name: "D", Replicas: 3}))
	res, err := one.Change(ctx, "f", change.UpdateBucket("A", ptr(5), nil), rollout.ChangeOptions{})
	if err != nil {
		t.Fatalf("change on the stale instance: %v", err)
	}
	if _, hasD := res.Feature.Bucket("D"); res.Feature.Version != 3 || !hasD {
		t.Fatalf("stale instance's change made version %d (D kept: %v), want 3 with D", res.Feature.Version, hasD)
	}
	if res.Report.FromVersion != 2 {
		t.Errorf("its report is from version %d, want 2: the churn of what really changed", res.Report.FromVersion)
	}

	// With If-Match of the version another instance served, a stale
	// instance checks the store rather than refusing.
	if _, err := two.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	mustChange(t, two, "f", change.Patch(ptr("from two"), nil, nil)) // version 4, one has 3
	v4, _ := two.Snapshot().Feature("f")
	if _, err := one.Change(ctx, "f", change.Patch(ptr("from one"), nil, nil), rollout.ChangeOptions{IfMatch: v4.Tag()}); err != nil {
		t.Fatalf("change with the current tag on a stale instance: %v", err)
	}
	if _, err := one.Change(ctx, "f", change.Patch(ptr("again"), nil, nil), rollout.ChangeOptions{IfMatch: v4.Tag()}); feature.ErrorCode(err) != feature.EPrecondition {
		t.Fatalf("change with an old tag: err = %v, want %s", err, feature.EPrecondition)
	}

	// Archived and purged on two, the key is free on one although its
	// snapshot has it.
	if _, err := two.Archive(ctx, "f", rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := two.Purge(ctx, "f", rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, one, abc("f"))
	if _, err := two.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	f1, _ := one.Snapshot().Feature("f")
	f2, ok := two.Snapshot().Feature("f")
	if !ok || f2.ID != f1.ID || f2.Version != 1 {
		t.Fatalf("after delete and re-create elsewhere, instance two has %+v, want the new feature %s at version 1", f2, f1.ID)
	}

	// Token changes come through the feed too.
	tokens, err := auth.NewTokens(ctx, db2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tokens.Create(ctx, "ci", auth.RoleViewer, time.Now()); err != nil {
		t.Fatal(err)
	}
	commits, err = one.Sync(ctx)
	if err != nil || len(commits) == 0 || commits[len(commits)-1].Kind != rollout.CommitToken {
		t.Fatalf("Sync after a token was created = %+v, %v; want a token commit last", commits, err)
	}
}

// TestFollowPolls: Follow alone, with no notifications, brings another
// instance's change in within a few intervals.
func TestFollowPolls(t *testing.T) {
	one, two, _ := twoInstances(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { two.Follow(ctx, rollout.FollowOptions{Interval: 20 * time.Millisecond}); close(done) }()
	defer func() { cancel(); <-done }()
	mustCreate(t, one, abc("f"))
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := two.Snapshot().Feature("f"); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("instance two never saw f")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
