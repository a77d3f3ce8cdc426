// Package storetest is the contract every store of features must meet: one
// table of cases that the store on each dialect (store/sqlite,
// store/postgres) runs, so that the two cannot drift. It also gives
// tests a PostgreSQL database of their own (PostgresDSN).
package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/experiment"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/webhook"
)

// Store is what a store under test implements.
type Store interface {
	rollout.Store
	experiment.ExperimentStore
	auth.Store
	webhook.Store
	webhook.Outbox
	// Versions returns what VersionSummaries returns, each entry with its
	// whole configuration, overrides included.
	Versions(ctx context.Context, key string, before, limit int) ([]rollout.Version, error)
	// SessionKey and CheckWrite are what the server needs besides
	// (package cmd/internal/serve).
	SessionKey(ctx context.Context) ([]byte, error)
	CheckWrite(ctx context.Context) error
}

// Opened is a new, empty database for one case.
type Opened struct {
	// Store is a handle on the database.
	Store Store
	// Open opens another handle on the same database, closed when t ends.
	Open func(t *testing.T) Store
	// HistoryBytes, when not nil, returns how many bytes the database
	// uses for what it keeps: it may count more than features' history,
	// but must grow with it.
	HistoryBytes func(t *testing.T) int64
	// TableBytes, when not nil, returns how many bytes the database uses
	// for the table (indexes included); it may count more, but must grow
	// with the table.
	TableBytes func(t *testing.T, table string) int64
	// In returns Store bound to the environment env (store.DB.In).
	In func(env string) Store
	// Exec, when not nil, runs a statement on the database itself,
	// bypassing the store: what an operator with a SQL shell could do.
	Exec func(t *testing.T, stmt string) error
}

// Run runs every case of the contract against stores open makes. open
// makes a new, empty database for each case and closes what it opened when
// t ends.
func Run(t *testing.T, open func(t *testing.T) Opened) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, open(t)) })
	}
}

var cases = []struct {
	name string
	run  func(t *testing.T, o Opened)
}{
	{"create", testCreate},
	{"features sorted, none is empty", testFeaturesSortedAndEmpty},
	{"create assigns an ID", testCreateAssignsID},
	{"deleted and created again", testDeleteAndCreateAgain},
	{"versions paged", testVersionsPaged},
	{"optimistic update", testUpdate},
	{"conflict", testConflict},
	{"delete", testDelete},
	{"archive, restore, purge", testArchive},
	{"audit trail", testAuditTrail},
	{"audit events are append-only", testAuditAppendOnly},
	{"webhooks", testWebhooks},
	{"webhook limits", testWebhookLimits},
	{"webhook claims race", testWebhookClaimsRace},
	{"versions paging", testVersions},
	{"overrides across versions", testOverrideHistory},
	{"history grows with changes, not overrides", testHistoryGrowth},
	{"version not found", testVersionNotFound},
	{"changes across features", testChanges},
	{"exposures add up", testExposures},
	{"exposure batches count once", testExposureBatches},
	{"exposure batch IDs expire", testExposureBatchExpiry},
	{"exposures by hour", testExposureHours},
	{"exposures per rule", testRuleExposures},
	{"exposure totals saturate", testExposureSaturation},
	{"tokens", testTokens},
	{"revision feed", testFeed},
	{"revisions from two handles", testFeedConcurrent},
	{"session key", testSessionKey},
	{"ended sessions", testEndedSessions},
	{"people's sessions", testPeopleSessions},
	{"audit actors by substring", testAuditActorContains},
	{"check write", testCheckWrite},
	{"ramps", testRamps},
	{"ramp step applies once", testRampStep},
	{"schedules", testSchedules},
	{"schedule caps", testScheduleCaps},
	{"update with the feature held", testUpdateHeld},
	{"idempotency keys", testIdempotency},
	{"idempotency key committed with its change", testIdempotentWrite},
	{"settings", testSettings},
	{"change requests", testRequests},
	{"open change requests per author are capped", testRequestCap},
	{"batch of versions", testBatch},
	{"batch of versions is all or nothing", testBatchAllOrNothing},
	{"batch of segments and versions", testBatchSegments},
	{"segments", testSegments},
	{"user lists", testUserLists},
	{"metrics", testMetrics},
	{"exposures: distinct users", testExposureUsers},
	{"experiments: drops, snapshots, purge", testExperimentHistoryStore},
	{"experiments: a million users", testExperimentMillion},
	{"experiments: one running per feature row", testExperimentLifecycle},
	{"experiments: first exposures and totals", testExperimentUsers},
	{"experiments: per environment", testExperimentEnvironments},
	{"track batches count once", testTrackBatches},
	{"storage per exposed user", testExperimentUserBytes},
}

// t0 has nanoseconds: a feature's times must come back exact from every
// store, since instances compare what they serve.
var t0 = time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC)

// newFeature returns a feature at version 1 with every field set.
func newFeature(key string) feature.Feature {
	return feature.Feature{
		ID:          "id-" + key,
		Key:         key,
		Description: "checkout <b>flow</b> & more",
		Enabled:     true,
		Salt:        "s1",
		Fallback:    "control",
		Buckets: []feature.Bucket{
			{Name: "control", Replicas: 100},
			{Name: "treatment", Replicas: 50, Value: json.RawMessage(`{"n":[1,2.5,null,1e3],"color":"<red>"}`)},
			{Name: "off", Replicas: 1, Value: json.RawMessage(`false`)},
		},
		Overrides: map[string]string{"alice": "treatment", "bob@example.com": "control"},
		Version:   1,
		CreatedAt: t0,
		UpdatedAt: t0,
	}
}

// next returns f changed into its next version, an hour later.
func next(f feature.Feature) feature.Feature {
	g := f.Clone()
	g.Version++
	g.UpdatedAt = f.UpdatedAt.Add(time.Hour)
	g.Buckets[1].Replicas += 10
	g.Description = fmt.Sprintf("version %d", g.Version)
	return g
}

// versionOf returns the history entry of the change to after. Its time has
// microseconds only: PostgreSQL keeps no more for history.
func versionOf(after feature.Feature) rollout.Version {
	return rollout.Version{
		Version:       after.Version,
		Actor:         "ops@example.com",
		Time:          after.UpdatedAt.Truncate(time.Microsecond),
		Summary:       fmt.Sprintf("change %d", after.Version),
		Config:        after,
		OverrideCount: len(after.Overrides),
		Report: feature.Report{
			FromVersion:  after.Version - 1,
			ToVersion:    after.Version,
			Method:       "ring",
			Churn:        0.0625,
			Moves:        []feature.Move{{From: "control", To: "treatment", Share: 0.0625}, {From: "", To: "off", Share: 0.001}},
			SharesBefore: map[string]float64{"control": 0.5, "treatment": 0.5},
			SharesAfter:  map[string]float64{"control": 0.4375, "treatment": 0.5625},
			ModuloChurn:  0.5,
		},
	}
}

func create(t *testing.T, s Store, f feature.Feature) rollout.Version {
	t.Helper()
	v := versionOf(f)
	if err := s.CreateFeature(context.Background(), f, v); err != nil {
		t.Fatalf("CreateFeature(%q) = %v", f.Key, err)
	}
	return v
}

// history creates f and updates it n-1 times; it returns the versions
// oldest first and the feature as last stored.
func history(t *testing.T, s Store, f feature.Feature, n int) ([]rollout.Version, feature.Feature) {
	t.Helper()
	vs := []rollout.Version{create(t, s, f)}
	for range n - 1 {
		g := next(f)
		v := versionOf(g)
		if err := s.UpdateFeature(context.Background(), g, v); err != nil {
			t.Fatalf("UpdateFeature(%q to version %d) = %v", g.Key, g.Version, err)
		}
		vs = append(vs, v)
		f = g
	}
	return vs, f
}

func wantCode(t *testing.T, call string, err error, code string) {
	t.Helper()
	if got := feature.ErrorCode(err); err == nil || got != code {
		t.Errorf("%s = %v (code %q), want code %q", call, err, got, code)
	}
}

func wantFeatures(t *testing.T, s Store, want ...feature.Feature) {
	t.Helper()
	got, err := s.Features(context.Background())
	if err != nil {
		t.Fatalf("Features() = %v", err)
	}
	if want == nil {
		want = []feature.Feature{}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Features() mismatch (-want +got):\n%s", diff)
	}
}

func wantFeature(t *testing.T, s Store, want feature.Feature) {
	t.Helper()
	got, err := s.Feature(context.Background(), want.Key)
	if err != nil {
		t.Fatalf("Feature(%q) = %v", want.Key, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Feature(%q) mismatch (-want +got):\n%s", want.Key, diff)
	}
}

func wantRevision(t *testing.T, s Store, want int64) {
	t.Helper()
	got, err := s.Revision(context.Background())
	if err != nil {
		t.Fatalf("Revision() = %v", err)
	}
	if got != want {
		t.Errorf("Revision() = %d, want %d", got, want)
	}
}

func testCreate(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	wantFeatures(t, s)
	b, a := newFeature("b"), newFeature("a")
	vb := create(t, s, b)
	create(t, s, a)
	wantFeatures(t, s, a, b) // by key
	wantFeature(t, s, b)
	if loc := mustFeature(t, s, "b").UpdatedAt.Location(); loc != time.UTC {
		t.Errorf("Feature(b).UpdatedAt.Location() = %v, want UTC", loc)
	}
	got, err := s.Version(ctx, "b", 1)
	if err != nil {
		t.Fatalf("Version(b, 1) = %v", err)
	}
	if diff := cmp.Diff(vb, got); diff != "" {
		t.Errorf("Version(b, 1) mismatch (-want +got):\n%s", diff)
	}
	_, err = s.Feature(ctx, "missing")
	wantCode(t, "Feature(missing)", err, feature.ENotFound)

	// Another handle sees it.
	wantFeature(t, o.Open(t), b)

	// A feature without an ID gets one; nil overrides stay nil.
	c := newFeature("c")
	c.ID, c.Overrides = "", nil
	if err := s.CreateFeature(ctx, c, versionOf(c)); err != nil {
		t.Fatalf("CreateFeature(c without ID) = %v", err)
	}
	gotC := mustFeature(t, s, "c")
	if gotC.ID == "" || gotC.Overrides != nil {
		t.Errorf("Feature(c) = ID %q, overrides %v; want a new ID and nil overrides", gotC.ID, gotC.Overrides)
	}
	// Local times come back in UTC, the same instant.
	d := newFeature("d")
	d.CreatedAt = t0.In(time.FixedZone("UTC+9", 9*60*60))
	d.UpdatedAt = d.CreatedAt
	create(t, s, d)
	d.CreatedAt, d.UpdatedAt = t0, t0
	wantFeature(t, s, d)
}

func mustFeature(t *testing.T, s Store, key string) feature.Feature {
	t.Helper()
	f, err := s.Feature(context.Background(), key)
	if err != nil {
		t.Fatalf("Feature(%q) = %v", key, err)
	}
	return f
}

func testUpdate(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	f := newFeature("f")
	v1 := create(t, s, f)
	g := next(f)
	v2 := versionOf(g)
	if err := s.UpdateFeature(ctx, g, v2); err != nil {
		t.Fatalf("UpdateFeature(to 2) = %v", err)
	}
	wantFeature(t, s, g)
	wantFeatures(t, s, g)
	vs, err := s.Versions(ctx, "f", 0, 0)
	if err != nil {
		t.Fatalf("Versions(f) = %v", err)
	}
	if diff := cmp.Diff([]rollout.Version{v2, v1}, vs); diff != "" {
		t.Errorf("Versions(f) mismatch (-want +got):\n%s", diff)
	}
	// The same change again expects version 1, which is gone.
	wantCode(t, "UpdateFeature(to 2 again)", s.UpdateFeature(ctx, g, v2), feature.EConflict)
	// A handle that read version 1 loses to the one that wrote 2.
	other := o.Open(t)
	g2 := next(f)
	g2.Description = "stale"
	wantCode(t, "UpdateFeature(stale, other handle)", other.UpdateFeature(ctx, g2, versionOf(g2)), feature.EConflict)
	wantFeature(t, other, g)

	h := next(newFeature("missing"))
	wantCode(t, "UpdateFeature(missing)", s.UpdateFeature(ctx, h, versionOf(h)), feature.ENotFound)
	bad := next(g)
	v := versionOf(bad)
	v.Version++
	if err := s.UpdateFeature(ctx, bad, v); err == nil {
		t.Errorf("UpdateFeature(entry version %d, feature version %d) = nil, want an error", v.Version, bad.Version)
	}
	wantFeature(t, s, g)
}

func testConflict(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	f := newFeature("f")
	create(t, s, f)
	dup := newFeature("f")
	dup.ID = "another-id"
	wantCode(t, "CreateFeature(same key)", s.CreateFeature(ctx, dup, versionOf(dup)), feature.EConflict)
	sameID := newFeature("g")
	sameID.ID = f.ID
	wantCode(t, "CreateFeature(same ID)", s.CreateFeature(ctx, sameID, versionOf(sameID)), feature.EConflict)
	wantFeatures(t, s, f)

	// Deleted and created again: a change made from the old one conflicts,
	// though the versions match.
	if err := deleteFeature(ctx, s, "f", 1); err != nil {
		t.Fatalf("deleteFeature(f, 1) = %v", err)
	}
	again := newFeature("f")
	again.ID = "id-f-again"
	create(t, s, again)
	g := next(f)
	wantCode(t, "UpdateFeature(from the deleted feature)", s.UpdateFeature(ctx, g, versionOf(g)), feature.EConflict)
	wantFeatures(t, s, again)
	// Without an ID, only the version is checked.
	h := next(again)
	h.ID = ""
	if err := s.UpdateFeature(ctx, h, versionOf(h)); err != nil {
		t.Errorf("UpdateFeature(no ID) = %v", err)
	}
}

func testDelete(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	_, f := history(t, s, newFeature("f"), 3)
	keep := newFeature("keep")
	create(t, s, keep)
	if err := s.AddExposures(ctx, []feature.Exposure{{FeatureID: f.ID, Version: 3, Bucket: "control", Count: 4}}); err != nil {
		t.Fatalf("AddExposures() = %v", err)
	}
	wantCode(t, "deleteFeature(f, 2)", deleteFeature(ctx, s, "f", 2), feature.EConflict)
	wantFeatures(t, s, f, keep)
	if err := deleteFeature(ctx, s, "f", 3); err != nil {
		t.Fatalf("deleteFeature(f, 3) = %v", err)
	}
	wantFeatures(t, s, keep)
	_, err := s.Feature(ctx, "f")
	wantCode(t, "Feature(deleted)", err, feature.ENotFound)
	_, err = s.Versions(ctx, "f", 0, 0)
	wantCode(t, "Versions(deleted)", err, feature.ENotFound)
	_, err = s.Version(ctx, "f", 1)
	wantCode(t, "Version(deleted, 1)", err, feature.ENotFound)
	wantCode(t, "deleteFeature(deleted)", deleteFeature(ctx, s, "f", 3), feature.ENotFound)
	if es, err := s.Exposures(ctx, "f"); err != nil || len(es) != 0 {
		t.Errorf("Exposures(deleted) = %v, %v; want none", es, err)
	}

	// Created again, it starts a new history: the old one is gone.
	again := newFeature("f")
	again.ID = "id-f-again"
	v := create(t, s, again)
	vs, err := s.Versions(ctx, "f", 0, 0)
	if err != nil {
		t.Fatalf("Versions(f again) = %v", err)
	}
	if diff := cmp.Diff([]rollout.Version{v}, vs); diff != "" {
		t.Errorf("Versions(f again) mismatch (-want +got):\n%s", diff)
	}
	if es, err := s.Exposures(ctx, "f"); err != nil || len(es) != 0 {
		t.Errorf("Exposures(f again) = %v, %v; want none", es, err)
	}
}

func testVersions(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	all, _ := history(t, s, newFeature("f"), 5)
	create(t, s, newFeature("other"))
	newest := slices.Clone(all)
	slices.Reverse(newest) // versions 5..1
	tests := []struct {
		before, limit int
		want          []rollout.Version
	}{
		{0, 0, newest},
		{0, -1, newest},
		{0, 2, newest[:2]},
		{4, 2, newest[2:4]},
		{4, 0, newest[2:]},
		{2, 10, newest[4:]},
		{1, 0, []rollout.Version{}},
		{9, 1, newest[:1]},
	}
	for _, tt := range tests {
		got, err := s.Versions(ctx, "f", tt.before, tt.limit)
		if err != nil {
			t.Fatalf("Versions(f, %d, %d) = %v", tt.before, tt.limit, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Versions(f, %d, %d) mismatch (-want +got):\n%s", tt.before, tt.limit, diff)
		}
	}
	_, err := s.Versions(ctx, "missing", 0, 0)
	wantCode(t, "Versions(missing)", err, feature.ENotFound)
}

func testVersionNotFound(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	all, _ := history(t, s, newFeature("f"), 2)
	got, err := s.Version(ctx, "f", 2)
	if err != nil {
		t.Fatalf("Version(f, 2) = %v", err)
	}
	if diff := cmp.Diff(all[1], got); diff != "" {
		t.Errorf("Version(f, 2) mismatch (-want +got):\n%s", diff)
	}
	for _, tt := range []struct {
		key     string
		version int
	}{{"f", 3}, {"f", 0}, {"missing", 1}} {
		_, err := s.Version(ctx, tt.key, tt.version)
		wantCode(t, fmt.Sprintf("Version(%q, %d)", tt.key, tt.version), err, feature.ENotFound)
	}
}

// testExposures: two handles add counts at once, with duplicates within a
// batch; every count is added exactly once, and counts of features that do
// not exist are dropped.
func testExposures(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	f, g := newFeature("f"), newFeature("g")
	create(t, s, f)
	create(t, s, g)
	batch := []feature.Exposure{
		{FeatureID: g.ID, Version: 1, Bucket: "treatment", Count: 1},
		{FeatureID: f.ID, Version: 1, Bucket: "control", Count: 3},
		{FeatureID: f.ID, Version: 1, Bucket: "", Count: 2},
		{FeatureID: f.ID, Version: 1, Bucket: "control", Count: 1},
		{FeatureID: "gone", Version: 1, Bucket: "control", Count: 7},
	}
	handles := []Store{s, o.Open(t)}
	const workers, rounds = 4, 10
	var wg sync.WaitGroup
	errs := make(chan error, len(handles)*workers*rounds)
	for _, h := range handles {
		for range workers {
			wg.Go(func() {
				for range rounds {
					errs <- h.AddExposures(ctx, batch)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("AddExposures() = %v", err)
		}
	}
	n := int64(len(handles) * workers * rounds)
	got, err := s.Exposures(ctx, "f")
	if err != nil {
		t.Fatalf("Exposures(f) = %v", err)
	}
	want := []feature.Exposure{
		{Feature: "f", FeatureID: f.ID, Version: 1, Bucket: "", Count: 2 * n},
		{Feature: "f", FeatureID: f.ID, Version: 1, Bucket: "control", Count: 4 * n},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Exposures(f) mismatch (-want +got):\n%s", diff)
	}
	// Newest version first.
	g2 := next(g)
	if err := s.UpdateFeature(ctx, g2, versionOf(g2)); err != nil {
		t.Fatal(err)
	}
	if err := s.AddExposures(ctx, []feature.Exposure{{FeatureID: g.ID, Version: 2, Bucket: "control", Count: 5}}); err != nil {
		t.Fatal(err)
	}
	got, err = o.Open(t).Exposures(ctx, "g")
	if err != nil {
		t.Fatalf("Exposures(g) = %v", err)
	}
	want = []feature.Exposure{
		{Feature: "g", FeatureID: g.ID, Version: 2, Bucket: "control", Count: 5},
		{Feature: "g", FeatureID: g.ID, Version: 1, Bucket: "treatment", Count: n},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Exposures(g) mismatch (-want +got):\n%s", diff)
	}
	if err := s.AddExposures(ctx, nil); err != nil {
		t.Errorf("AddExposures(nil) = %v", err)
	}
	if got, err := s.Exposures(ctx, "missing"); err != nil || len(got) != 0 {
		t.Errorf("Exposures(missing) = %v, %v; want none", got, err)
	}
}

func testTokens(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	if got, err := s.Tokens(ctx); err != nil || len(got) != 0 {
		t.Fatalf("Tokens() of a new database = %v, %v; want none", got, err)
	}
	tok := func(id, name string, role auth.Role, at time.Time) auth.Token {
		return auth.Token{ID: id, Name: name, Role: role, Hash: "hash-" + id, CreatedAt: at}
	}
	at := t0.Truncate(time.Microsecond)
	ci := tok("1", "ci", auth.RoleEditor, at)
	ops := tok("2", "ops", auth.RoleAdmin, at.Add(time.Second))
	for _, x := range []auth.Token{ci, ops} {
		if err := s.CreateToken(ctx, x); err != nil {
			t.Fatalf("CreateToken(%q) = %v", x.Name, err)
		}
	}
	wantCode(t, "CreateToken(ci again)", s.CreateToken(ctx, tok("3", "ci", auth.RoleViewer, at.Add(2*time.Second))), feature.EConflict)
	revokedAt := at.Add(time.Minute)
	if err := o.Open(t).RevokeToken(ctx, "ci", revokedAt, "alice"); err != nil {
		t.Fatalf("RevokeToken(ci) = %v", err)
	}
	wantCode(t, "RevokeToken(ci again)", s.RevokeToken(ctx, "ci", revokedAt, "alice"), feature.ENotFound)
	wantCode(t, "RevokeToken(unknown)", s.RevokeToken(ctx, "unknown", revokedAt, "alice"), feature.ENotFound)
	ci2 := tok("4", "ci", auth.RoleViewer, at.Add(time.Hour))
	if err := s.CreateToken(ctx, ci2); err != nil {
		t.Fatalf("CreateToken(ci after revoking it) = %v", err)
	}
	got, err := o.Open(t).Tokens(ctx)
	if err != nil {
		t.Fatalf("Tokens() = %v", err)
	}
	ci.RevokedAt = &revokedAt
	if diff := cmp.Diff([]auth.Token{ci, ops, ci2}, got); diff != "" {
		t.Errorf("Tokens() mismatch (-want +got):\n%s", diff)
	}

	// Every role is stored, the app roles that split evaluate included.
	want := got
	for i, role := range auth.Roles {
		x := tok(fmt.Sprintf("role-%d", i), "role-"+string(role), role, at.Add(2*time.Hour+time.Duration(i)*time.Second))
		if err := s.CreateToken(ctx, x); err != nil {
			t.Fatalf("CreateToken(role %s) = %v", role, err)
		}
		want = append(want, x)
	}
	got, err = o.Open(t).Tokens(ctx)
	if err != nil {
		t.Fatalf("Tokens() = %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Tokens() with every role mismatch (-want +got):\n%s", diff)
	}
}

// testFeed: each committed change writes one commit, with the next
// revision; refused changes write none.
func testFeed(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	wantRevision(t, s, 0)
	if got, err := s.Commits(ctx, 0, 0); err != nil || len(got) != 0 {
		t.Fatalf("Commits(0, 0) of a new database = %v, %v; want none", got, err)
	}
	start := time.Now().Add(-time.Second)
	f := newFeature("f")
	g := next(f)
	stale := next(f)
	stale.Description = "stale"
	missing := newFeature("missing")
	token := auth.Token{ID: "t1", Name: "ci", Role: auth.RoleEditor, Hash: "h1", CreatedAt: t0}
	type want struct {
		kind rollout.CommitKind
		key  string
	}
	steps := []struct {
		name   string
		change func() error
		commit *want // nil: refused, no commit
	}{
		{"create f", func() error { return s.CreateFeature(ctx, f, versionOf(f)) }, &want{rollout.CommitFeature, "f"}},
		{"create f again", func() error { return s.CreateFeature(ctx, f, versionOf(f)) }, nil},
		{"update f", func() error { return s.UpdateFeature(ctx, g, versionOf(g)) }, &want{rollout.CommitFeature, "f"}},
		{"update f from version 1", func() error { return s.UpdateFeature(ctx, stale, versionOf(stale)) }, nil},
		{"update missing", func() error { return s.UpdateFeature(ctx, next(missing), versionOf(next(missing))) }, nil},
		{"archive missing", func() error { return s.ArchiveFeature(ctx, "missing", 1, audit.Event{}, nil, nil) }, nil},
		{"create token", func() error { return s.CreateToken(ctx, token) }, &want{rollout.CommitToken, "ci"}},
		{"create token again", func() error {
			again := token
			again.ID, again.Hash = "t2", "h2"
			return s.CreateToken(ctx, again)
		}, nil},
		{"revoke token", func() error { return s.RevokeToken(ctx, "ci", t0, "alice") }, &want{rollout.CommitToken, "ci"}},
		{"revoke token again", func() error { return s.RevokeToken(ctx, "ci", t0, "alice") }, nil},
		{"purge f while served", func() error { return s.PurgeFeature(ctx, "f", audit.Event{}, nil) }, nil},
		{"archive f at version 1", func() error { return s.ArchiveFeature(ctx, "f", 1, audit.Event{}, nil, nil) }, nil},
		{"archive f", func() error { return s.ArchiveFeature(ctx, "f", 2, audit.Event{}, nil, nil) }, &want{rollout.CommitFeature, "f"}},
		{"archive f again", func() error { return s.ArchiveFeature(ctx, "f", 2, audit.Event{}, nil, nil) }, nil},
		{"purge f", func() error { return s.PurgeFeature(ctx, "f", audit.Event{}, nil) }, &want{rollout.CommitFeature, "f"}},
		{"add exposures", func() error { return s.AddExposures(ctx, []feature.Exposure{{FeatureID: f.ID, Version: 1, Count: 1}}) }, nil},
		{"session key", func() error { _, err := s.SessionKey(ctx); return err }, nil},
		{"check write", func() error { return s.CheckWrite(ctx) }, nil},
	}
	var rev int64
	var wantCommits []want
	for _, step := range steps {
		err := step.change()
		if step.commit == nil {
			if err != nil && feature.ErrorCode(err) != feature.EConflict && feature.ErrorCode(err) != feature.ENotFound {
				t.Fatalf("%s = %v, want nil, a conflict or not found", step.name, err)
			}
		} else {
			if err != nil {
				t.Fatalf("%s = %v", step.name, err)
			}
			rev++
			wantCommits = append(wantCommits, *step.commit)
		}
		wantRevision(t, s, rev)
		if t.Failed() {
			t.Fatalf("after %s", step.name)
		}
	}
	end := time.Now().Add(time.Second)
	wantRevision(t, o.Open(t), rev)
	if rev != 6 {
		t.Fatalf("%d commits made, want 6: the steps changed", rev)
	}

	all, err := s.Commits(ctx, 0, 0)
	if err != nil {
		t.Fatalf("Commits(0, 0) = %v", err)
	}
	var got []want
	for i, c := range all {
		got = append(got, want{c.Kind, c.Key})
		if c.Revision != int64(i+1) {
			t.Errorf("Commits(0, 0)[%d].Revision = %d, want %d", i, c.Revision, i+1)
		}
		if c.Time.Before(start) || c.Time.After(end) || c.Time.Location() != time.UTC {
			t.Errorf("Commits(0, 0)[%d].Time = %v, want a UTC time between %v and %v", i, c.Time, start, end)
		}
	}
	if diff := cmp.Diff(wantCommits, got, cmp.AllowUnexported(want{})); diff != "" {
		t.Errorf("Commits(0, 0) mismatch (-want +got):\n%s", diff)
	}
	for _, tt := range []struct {
		since int64
		limit int
		want  []rollout.Commit
	}{
		{0, 2, all[:2]},
		{1, 2, all[1:3]},
		{2, 0, all[2:]},
		{3, -1, all[3:]},
		{4, 1, all[4:5]},
		{5, 1, all[5:]},
		{6, 1, []rollout.Commit{}},
		{99, 0, []rollout.Commit{}},
	} {
		got, err := s.Commits(ctx, tt.since, tt.limit)
		if err != nil {
			t.Fatalf("Commits(%d, %d) = %v", tt.since, tt.limit, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Commits(%d, %d) mismatch (-want +got):\n%s", tt.since, tt.limit, diff)
		}
	}
}

// testFeedConcurrent: changes from two handles at once get one revision
// each, without gaps or repeats.
func testFeedConcurrent(t *testing.T, o Opened) {
	ctx := context.Background()
	handles := []Store{o.Store, o.Open(t)}
	const each = 10
	var wg sync.WaitGroup
	errs := make(chan error, len(handles)*each)
	for i, h := range handles {
		wg.Go(func() {
			for j := range each {
				f := newFeature(fmt.Sprintf("h%d-%d", i, j))
				errs <- h.CreateFeature(ctx, f, versionOf(f))
			}
		})
	}
	// Meanwhile a reader never sees a revision committed while a lower one
	// is not: the commits it sees are 1..n without gaps, and the revision
	// it read before them is among them.
	done := make(chan struct{})
	var gaps []string
	reader := o.Open(t)
	var rwg sync.WaitGroup
	rwg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			rev, err := reader.Revision(ctx)
			if err != nil {
				gaps = append(gaps, err.Error())
				return
			}
			cs, err := reader.Commits(ctx, 0, 0)
			if err != nil {
				gaps = append(gaps, err.Error())
				return
			}
			for i, c := range cs {
				if c.Revision != int64(i+1) {
					gaps = append(gaps, fmt.Sprintf("commit %d of %d has revision %d", i+1, len(cs), c.Revision))
					return
				}
			}
			if int64(len(cs)) < rev {
				gaps = append(gaps, fmt.Sprintf("Revision() = %d, then only %d commits", rev, len(cs)))
				return
			}
		}
	})
	wg.Wait()
	close(done)
	rwg.Wait()
	close(errs)
	if len(gaps) > 0 {
		t.Errorf("a reader during the writes saw: %v", gaps)
	}
	for err := range errs {
		if err != nil {
			t.Fatalf("CreateFeature() = %v", err)
		}
	}
	n := int64(len(handles) * each)
	wantRevision(t, o.Store, n)
	all, err := handles[1].Commits(ctx, 0, 0)
	if err != nil {
		t.Fatalf("Commits(0, 0) = %v", err)
	}
	keys := map[string]bool{}
	for i, c := range all {
		if c.Revision != int64(i+1) {
			t.Errorf("Commits(0, 0)[%d].Revision = %d, want %d", i, c.Revision, i+1)
		}
		keys[c.Key] = true
	}
	if int64(len(all)) != n || int64(len(keys)) != n {
		t.Errorf("Commits(0, 0) has %d commits of %d keys, want %d of %d", len(all), len(keys), n, n)
	}
}

// testSessionKey: handles asking at once for the first time agree, and the
// key stays.
func testSessionKey(t *testing.T, o Opened) {
	ctx := context.Background()
	handles := []Store{o.Store, o.Open(t), o.Open(t)}
	keys := make([][]byte, len(handles))
	errs := make([]error, len(handles))
	var wg sync.WaitGroup
	for i, h := range handles {
		wg.Go(func() { keys[i], errs[i] = h.SessionKey(ctx) })
	}
	wg.Wait()
	for i := range handles {
		if errs[i] != nil {
			t.Fatalf("SessionKey() of handle %d = %v", i, errs[i])
		}
		if len(keys[i]) != 32 {
			t.Errorf("SessionKey() of handle %d has %d bytes, want 32", i, len(keys[i]))
		}
		if string(keys[i]) != string(keys[0]) {
			t.Errorf("SessionKey() of handle %d = %x, handle 0 got %x: want the same", i, keys[i], keys[0])
		}
	}
	if string(keys[0]) == string(make([]byte, 32)) {
		t.Errorf("SessionKey() = %x, want random bytes", keys[0])
	}
	again, err := o.Open(t).SessionKey(ctx)
	if err != nil || string(again) != string(keys[0]) {
		t.Errorf("SessionKey() later = %x, %v; want %x", again, err, keys[0])
	}
	wantRevision(t, o.Store, 0)
}

func testCheckWrite(t *testing.T, o Opened) {
	ctx := context.Background()
	for range 2 {
		if err := o.Store.CheckWrite(ctx); err != nil {
			t.Fatalf("CheckWrite() = %v", err)
		}
	}
	wantRevision(t, o.Store, 0)
}

// testEndedSessions: a session that signed out is ended for every handle
// until it expires, with a token commit; ending it twice is harmless and
// writes no second commit; expired ones are swept.
func testEndedSessions(t *testing.T, o Opened) {
	ctx := context.Background()
	now := time.Now().UTC()
	other := o.Open(t)
	if err := o.Store.EndSession(ctx, "s1", now.Add(time.Hour)); err != nil {
		t.Fatalf("EndSession(s1) = %v", err)
	}
	if err := o.Store.EndSession(ctx, "s1", now.Add(time.Hour)); err != nil {
		t.Fatalf("EndSession(s1) again = %v", err)
	}
	if err := other.EndSession(ctx, "old", now.Add(-time.Minute)); err != nil {
		t.Fatalf("EndSession(old) = %v", err)
	}
	got, err := other.EndedSessions(ctx, now)
	if err != nil || len(got) != 1 || got[0] != "s1" {
		t.Fatalf("EndedSessions(now) = %q, %v; want [s1] (old has expired)", got, err)
	}
	if got, err := o.Store.EndedSessions(ctx, now.Add(2*time.Hour)); err != nil || len(got) != 0 {
		t.Errorf("EndedSessions(in two hours) = %q, %v; want none", got, err)
	}
	commits, err := o.Store.Commits(ctx, 0, 0)
	if err != nil || len(commits) != 2 {
		t.Fatalf("Commits() = %+v, %v; want one per session ended", commits, err)
	}
	for _, c := range commits {
		if c.Kind != rollout.CommitToken || c.Key != auth.SessionCommitKey {
			t.Errorf("commit %+v, want kind %q key %q", c, rollout.CommitToken, auth.SessionCommitKey)
		}
	}
	if n, err := other.SweepEndedSessions(ctx, now); err != nil || n != 1 {
		t.Errorf("SweepEndedSessions(now) = %d, %v; want 1 (old)", n, err)
	}
	if got, err := o.Store.EndedSessions(ctx, now); err != nil || len(got) != 1 || got[0] != "s1" {
		t.Errorf("EndedSessions(now) after a sweep = %q, %v; want [s1]", got, err)
	}
	if n, err := o.Store.SweepEndedSessions(ctx, now.Add(2*time.Hour)); err != nil || n != 1 {
		t.Errorf("SweepEndedSessions(in two hours) = %d, %v; want 1 (s1)", n, err)
	}
	if n, err := o.Store.SweepEndedSessions(ctx, now.Add(2*time.Hour)); err != nil || n != 0 {
		t.Errorf("SweepEndedSessions again = %d, %v; want 0", n, err)
	}
}

// testExposureBatches: a batch adds its counts once, however often it is
// sent, and from however many handles at once; another batch adds again.
func testExposureBatches(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	f := newFeature("f")
	create(t, s, f)
	batch := []feature.Exposure{
		{FeatureID: f.ID, Version: 1, Bucket: "control", Count: 3},
		{FeatureID: f.ID, Version: 1, Bucket: "", Count: 2},
		{FeatureID: f.ID, Version: 1, Bucket: "control", Count: 1},
		{FeatureID: "gone", Version: 1, Bucket: "control", Count: 7},
	}
	handles := []Store{s, o.Open(t)}
	const workers = 4
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		added int
		errs  []error
	)
	for _, h := range handles {
		for range workers {
			wg.Go(func() {
				ok, err := h.AddExposureBatch(ctx, "batch-0001", t0, batch)
				mu.Lock()
				defer mu.Unlock()
				if ok {
					added++
				}
				if err != nil {
					errs = append(errs, err)
				}
			})
		}
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("AddExposureBatch(batch-0001) = %v", errs)
	}
	if added != 1 {
		t.Errorf("AddExposureBatch(batch-0001) from %d calls at once added %d times, want 1", len(handles)*workers, added)
	}
	want := []feature.Exposure{
		{Feature: "f", FeatureID: f.ID, Version: 1, Bucket: "", Count: 2},
		{Feature: "f", FeatureID: f.ID, Version: 1, Bucket: "control", Count: 4},
	}
	check := func(when string) {
		t.Helper()
		got, err := s.Exposures(ctx, "f")
		if err != nil {
			t.Fatalf("Exposures(f) %s = %v", when, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Exposures(f) %s mismatch (-want +got):\n%s", when, diff)
		}
	}
	check("after one batch sent 8 times")

	if ok, err := o.Open(t).AddExposureBatch(ctx, "batch-0001", t0, batch); ok || err != nil {
		t.Errorf("AddExposureBatch(batch-0001) again = %v, %v; want false, nil", ok, err)
	}
	check("after a retry")

	if ok, err := s.AddExposureBatch(ctx, "batch-0002", t0, batch[:1]); !ok || err != nil {
		t.Errorf("AddExposureBatch(batch-0002) = %v, %v; want true, nil", ok, err)
	}
	want[1].Count += 3
	check("after a second batch")

	if ok, err := s.AddExposureBatch(ctx, "batch-0003", t0, nil); !ok || err != nil {
		t.Errorf("AddExposureBatch(batch-0003, nil) = %v, %v; want true, nil", ok, err)
	}
}

// testExposureBatchExpiry: a batch ID is remembered for
// rollout.ExposureBatchMemory after it was received, by the caller's clock,
// and then forgotten: the same ID counts again.
func testExposureBatchExpiry(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	f := newFeature("f")
	create(t, s, f)
	batch := []feature.Exposure{{FeatureID: f.ID, Version: 1, Bucket: "control", Hour: t0, Count: 1}}
	for _, tt := range []struct {
		at   time.Time
		want bool
	}{
		{t0, true},
		{t0.Add(time.Hour), false},
		{t0.Add(rollout.ExposureBatchMemory - time.Second), false},
		{t0.Add(rollout.ExposureBatchMemory + time.Second), true}, // expired, removed, counted again
		{t0.Add(rollout.ExposureBatchMemory + time.Minute), false},
	} {
		if added, err := s.AddExposureBatch(ctx, "batch-exp1", tt.at, batch); added != tt.want || err != nil {
			t.Errorf("AddExposureBatch(batch-exp1) at %v = %v, %v; want %v, nil", tt.at.Sub(t0), added, err, tt.want)
		}
	}
	if got, err := s.Exposures(ctx, "f"); err != nil || len(got) != 1 || got[0].Count != 2 {
		t.Errorf("Exposures(f) = %+v, %v; want one total of 2", got, err)
	}
}

// testExposureHours: counts are kept as one total per feature, version,
// bucket and hour, however many batches bring them; a count without an
// hour is kept apart (the totals from before hours were kept).
func testExposureHours(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	f := newFeature("f")
	create(t, s, f)
	h1 := t0.Truncate(time.Hour)
	h2 := h1.Add(time.Hour)
	for i := range 50 {
		at := h1.Add(time.Duration(i) * time.Minute) // 50 batches in hour h1
		e := feature.Exposure{FeatureID: f.ID, Version: 1, Bucket: "control", Hour: at, Count: 2}
		if added, err := s.AddExposureBatch(ctx, fmt.Sprintf("batch-hour-%02d", i), at, []feature.Exposure{e}); !added || err != nil {
			t.Fatalf("AddExposureBatch(%d) = %v, %v", i, added, err)
		}
	}
	if err := s.AddExposures(ctx, []feature.Exposure{
		{FeatureID: f.ID, Version: 1, Bucket: "control", Hour: h2.Add(59 * time.Minute), Count: 7},
		{FeatureID: f.ID, Version: 1, Bucket: "control", Count: 5},
	}); err != nil {
		t.Fatalf("AddExposures() = %v", err)
	}
	got, err := o.Open(t).Exposures(ctx, "f")
	if err != nil {
		t.Fatalf("Exposures(f) = %v", err)
	}
	want := []feature.Exposure{
		{Feature: "f", FeatureID: f.ID, Version: 1, Bucket: "control", Count: 5},
		{Feature: "f", FeatureID: f.ID, Version: 1, Bucket: "control", Hour: h1, Count: 2 * 50},
		{Feature: "f", FeatureID: f.ID, Version: 1, Bucket: "control", Hour: h2, Count: 7},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Exposures(f) mismatch (-want +got):\n%s", diff)
	}
}

// testRuleExposures: counts with a rule add up per feature, version, rule
// and hour, from AddExposures and batches (a batch sent again adds
// nothing), without changing the totals per bucket; counts without one
// (old clients) add to their bucket only; RuleExposures leaves out the hours
// before since, and other features' counts; a deleted feature's go with it.
func testRuleExposures(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	f := newFeature("f")
	create(t, s, f)
	g := newFeature("g")
	create(t, s, g)
	h1 := t0.Truncate(time.Hour)
	h2 := h1.Add(time.Hour)
	ring, ent := "", "ent"
	if err := s.AddExposures(ctx, []feature.Exposure{
		{FeatureID: f.ID, Version: 1, Bucket: "control", Hour: h1, Count: 3, Rule: &ent},
		{FeatureID: f.ID, Version: 1, Bucket: "control", Hour: h1.Add(time.Minute), Count: 4, Rule: &ent},
		{FeatureID: f.ID, Version: 1, Bucket: "control", Hour: h2, Count: 5, Rule: &ring},
		{FeatureID: f.ID, Version: 1, Bucket: "control", Hour: h2, Count: 6}, // an old client's: no rule
		{FeatureID: g.ID, Version: 1, Bucket: "control", Hour: h2, Count: 8, Rule: &ent},
	}); err != nil {
		t.Fatalf("AddExposures() = %v", err)
	}
	batch := []feature.Exposure{{FeatureID: f.ID, Version: 1, Bucket: "control", Hour: h2, Count: 10, Rule: &ent}}
	for range 2 {
		if _, err := s.AddExposureBatch(ctx, "batch-rules", h2, batch); err != nil {
			t.Fatalf("AddExposureBatch() = %v", err)
		}
	}
	got, err := o.Open(t).RuleExposures(ctx, "f", time.Time{})
	if err != nil {
		t.Fatalf("RuleExposures(f) = %v", err)
	}
	want := []feature.Exposure{
		{Feature: "f", FeatureID: f.ID, Version: 1, Hour: h2, Count: 5, Rule: &ring},
		{Feature: "f", FeatureID: f.ID, Version: 1, Hour: h1, Count: 7, Rule: &ent},
		{Feature: "f", FeatureID: f.ID, Version: 1, Hour: h2, Count: 10, Rule: &ent},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("RuleExposures(f) mismatch (-want +got):\n%s", diff)
	}
	if got, err := s.RuleExposures(ctx, "f", h2.Add(30*time.Minute)); err != nil || len(got) != 2 {
		t.Errorf("RuleExposures(f, since h2) = %v, %v; want the 2 totals of h2", got, err)
	}
	buckets, err := s.Exposures(ctx, "f")
	if err != nil {
		t.Fatalf("Exposures(f) = %v", err)
	}
	wantBuckets := []feature.Exposure{
		{Feature: "f", FeatureID: f.ID, Version: 1, Bucket: "control", Hour: h1, Count: 7},
		{Feature: "f", FeatureID: f.ID, Version: 1, Bucket: "control", Hour: h2, Count: 5 + 6 + 10},
	}
	if diff := cmp.Diff(wantBuckets, buckets); diff != "" {
		t.Errorf("Exposures(f) mismatch (-want +got):\n%s", diff)
	}
	if err := deleteFeature(ctx, s, "g", 1); err != nil {
		t.Fatalf("deleteFeature(g, 1) = %v", err)
	}
	if got, err := s.RuleExposures(ctx, "g", time.Time{}); err != nil || len(got) != 0 {
		t.Errorf("RuleExposures(deleted g) = %v, %v; want none", got, err)
	}
}

// testExposureSaturation: a total that would pass the largest int64 stays
// at it, whether counts come in one call or many, and later counts still
// add (to it) without an error; a version no integer column holds, or a
// negative count, is refused and nothing is stored.
func testExposureSaturation(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	f := newFeature("f")
	create(t, s, f)
	const most = math.MaxInt64
	e := func(n int64) feature.Exposure {
		return feature.Exposure{FeatureID: f.ID, Version: 1, Bucket: "control", Hour: t0, Count: n}
	}
	if err := s.AddExposures(ctx, []feature.Exposure{e(most - 1), e(most), e(3)}); err != nil {
		t.Fatalf("AddExposures(near the largest int64) = %v", err)
	}
	if err := s.AddExposures(ctx, []feature.Exposure{e(most)}); err != nil {
		t.Fatalf("AddExposures(to a saturated total) = %v", err)
	}
	if added, err := s.AddExposureBatch(ctx, "batch-most", t0, []feature.Exposure{e(most)}); !added || err != nil {
		t.Fatalf("AddExposureBatch(to a saturated total) = %v, %v", added, err)
	}
	for _, bad := range []feature.Exposure{
		{FeatureID: f.ID, Version: 1<<32 + 1, Bucket: "control", Hour: t0, Count: 1},
		{FeatureID: f.ID, Version: 0, Bucket: "control", Hour: t0, Count: 1},
		{FeatureID: f.ID, Version: 1, Bucket: "off", Hour: t0, Count: -1},
	} {
		err := s.AddExposures(ctx, []feature.Exposure{bad})
		wantCode(t, fmt.Sprintf("AddExposures(version %d, count %d)", bad.Version, bad.Count), err, feature.EInvalid)
		_, err = s.AddExposureBatch(ctx, "batch-bad-1", t0, []feature.Exposure{e(1), bad})
		wantCode(t, fmt.Sprintf("AddExposureBatch(version %d, count %d)", bad.Version, bad.Count), err, feature.EInvalid)
	}
	got, err := s.Exposures(ctx, "f")
	if err != nil {
		t.Fatalf("Exposures(f) = %v", err)
	}
	want := []feature.Exposure{{Feature: "f", FeatureID: f.ID, Version: 1, Bucket: "control", Hour: t0.Truncate(time.Hour), Count: most}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Exposures(f) mismatch (-want +got):\n%s", diff)
	}
}

// testChanges writes versions of two features in turn, with actors and
// comments, and reads the audit log back filtered and a page at a time.
func testChanges(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	a, b := newFeature("a"), newFeature("b")
	b.ID = "id-b"
	write := func(f feature.Feature, actor, comment string) rollout.Version {
		t.Helper()
		v := versionOf(f)
		v.Actor, v.Comment = actor, comment
		var err error
		if f.Version == 1 {
			err = s.CreateFeature(ctx, f, v)
		} else {
			err = s.UpdateFeature(ctx, f, v)
		}
		if err != nil {
			t.Fatalf("write %q version %d = %v", f.Key, f.Version, err)
		}
		return v
	}
	a1 := write(a, "alice", "first, with a <b>tag</b> & ünïcode\nand a second line")
	b1 := write(b, "bob", "")
	a2 := write(next(a), "bob", "why: 10 % more")
	b2 := write(next(b), "alice", "")
	a3 := write(next(next(a)), "alice", "")
	// The audit log leaves out the overrides, as VersionSummaries does.
	a1, b1, a2, b2, a3 = summary(a1), summary(b1), summary(a2), summary(b2), summary(a3)
	all := []rollout.Version{a3, b2, a2, b1, a1} // newest first

	get := func(q rollout.ChangeQuery) []rollout.Version {
		t.Helper()
		got, err := s.Changes(ctx, q)
		if err != nil {
			t.Fatalf("Changes(%+v) = %v", q, err)
		}
		return got
	}
	noSeq := cmp.Transformer("noSeq", func(v rollout.Version) rollout.Version { v.Seq = 0; return v })
	everything := get(rollout.ChangeQuery{})
	if diff := cmp.Diff(all, everything, noSeq); diff != "" {
		t.Fatalf("Changes({}) mismatch (-want +got):\n%s", diff)
	}
	for i := 1; i < len(everything); i++ {
		if everything[i].Seq <= 0 || everything[i].Seq >= everything[i-1].Seq {
			t.Fatalf("Changes({}) seqs %d then %d: want positive and falling", everything[i-1].Seq, everything[i].Seq)
		}
	}
	tests := []struct {
		name string
		q    rollout.ChangeQuery
		want []rollout.Version
	}{
		{"feature", rollout.ChangeQuery{Feature: "a"}, []rollout.Version{a3, a2, a1}},
		{"actor", rollout.ChangeQuery{Actor: "alice"}, []rollout.Version{a3, b2, a1}},
		{"feature and actor", rollout.ChangeQuery{Feature: "b", Actor: "alice"}, []rollout.Version{b2}},
		{"limit", rollout.ChangeQuery{Limit: 2}, []rollout.Version{a3, b2}},
		{"next page", rollout.ChangeQuery{Before: everything[1].Seq, Limit: 2}, []rollout.Version{a2, b1}},
		{"last page", rollout.ChangeQuery{Before: everything[3].Seq, Limit: 2}, []rollout.Version{a1}},
		{"filtered page", rollout.ChangeQuery{Actor: "bob", Before: everything[2].Seq}, []rollout.Version{b1}},
		{"no such feature", rollout.ChangeQuery{Feature: "missing"}, []rollout.Version{}},
		{"no such actor", rollout.ChangeQuery{Actor: "carol"}, []rollout.Version{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, get(tt.q), noSeq); diff != "" {
				t.Errorf("Changes(%+v) mismatch (-want +got):\n%s", tt.q, diff)
			}
		})
	}

	// VersionSummaries and Version carry the comment too.
	v, err := s.Version(ctx, "a", 2)
	if err != nil || v.Comment != a2.Comment {
		t.Errorf("Version(a, 2) = comment %q, %v; want %q", v.Comment, err, a2.Comment)
	}

	// A deleted feature's history leaves the log.
	if err := deleteFeature(ctx, s, "b", 2); err != nil {
		t.Fatalf("deleteFeature(b) = %v", err)
	}
	if diff := cmp.Diff([]rollout.Version{a3, a2, a1}, get(rollout.ChangeQuery{}), noSeq); diff != "" {
		t.Errorf("Changes({}) after deleting b mismatch (-want +got):\n%s", diff)
	}
}

// summary returns v as VersionSummaries returns it: without the overrides,
// with their number.
func summary(v rollout.Version) rollout.Version {
	v.OverrideCount, v.Config.Overrides = len(v.Config.Overrides), nil
	return v
}

// deleteFeature archives the feature key at version and purges it: what
// removed a feature before features were archived.
func deleteFeature(ctx context.Context, s Store, key string, version int) error {
	if err := s.ArchiveFeature(ctx, key, version, audit.Event{Actor: "test", Summary: "archived"}, nil, nil); err != nil {
		return err
	}
	return s.PurgeFeature(ctx, key, audit.Event{Actor: "test", Summary: "purged"}, nil)
}
