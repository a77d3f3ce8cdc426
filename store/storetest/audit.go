package storetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/ramp"
)

// events returns the audit events q selects, failing the test on error.
func events(t *testing.T, s Store, q audit.Query) []audit.Event {
	t.Helper()
	es, err := s.AuditEvents(context.Background(), q)
	if err != nil {
		t.Fatalf("AuditEvents(%+v) = %v", q, err)
	}
	return es
}

// kinds returns the kinds of es, "kind feature" each.
func kinds(es []audit.Event) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, string(e.Kind)+" "+e.Feature+e.Subject)
	}
	return out
}

func wantKinds(t *testing.T, s Store, q audit.Query, want ...string) []audit.Event {
	t.Helper()
	es := events(t, s, q)
	if want == nil {
		want = []string{}
	}
	if diff := cmp.Diff(want, kinds(es)); diff != "" {
		t.Errorf("AuditEvents(%+v) kinds mismatch (-want +got):\n%s", q, diff)
	}
	return es
}

// testArchive: an archived feature is not served but keeps its history;
// its key stays taken; it is restored as a new version; only an archived
// feature is purged, which removes its history but not its audit events;
// then the key is free.
func testArchive(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	_, f := history(t, s, newFeature("f"), 2)
	keep := newFeature("keep")
	create(t, s, keep)

	wantCode(t, "ArchiveFeature(stale version)", s.ArchiveFeature(ctx, "f", 1, audit.Event{Actor: "alice"}, nil, nil), feature.EConflict)
	wantCode(t, "ArchiveFeature(missing)", s.ArchiveFeature(ctx, "nope", 1, audit.Event{Actor: "alice"}, nil, nil), feature.ENotFound)
	wantCode(t, "PurgeFeature(served)", s.PurgeFeature(ctx, "f", audit.Event{Actor: "alice"}, nil), feature.EConflict)
	if err := s.ArchiveFeature(ctx, "f", 2, audit.Event{Actor: "alice", Kind: audit.Archive, Summary: "archived", Comment: "done with it"}, nil, nil); err != nil {
		t.Fatalf("ArchiveFeature(f, 2) = %v", err)
	}
	wantFeatures(t, s, keep)
	_, err := s.Feature(ctx, "f")
	wantCode(t, "Feature(archived)", err, feature.ENotFound)
	if vs, err := s.Versions(ctx, "f", 0, 0); err != nil || len(vs) != 2 {
		t.Errorf("Versions(archived) = %d versions, %v; want its 2", len(vs), err)
	}
	if cs, err := s.Changes(ctx, rollout.ChangeQuery{Feature: "f"}); err != nil || len(cs) != 2 {
		t.Errorf("Changes(archived) = %d versions, %v; want its 2", len(cs), err)
	}
	archived, err := s.ArchivedFeatures(ctx)
	if err != nil {
		t.Fatalf("ArchivedFeatures() = %v", err)
	}
	if diff := cmp.Diff([]feature.Feature{f}, archived); diff != "" {
		t.Errorf("ArchivedFeatures() mismatch (-want +got):\n%s", diff)
	}
	got, err := s.ArchivedFeature(ctx, "f")
	if err != nil || got.Version != 2 {
		t.Errorf("ArchivedFeature(f) = version %d, %v; want 2", got.Version, err)
	}
	_, err = s.ArchivedFeature(ctx, "keep")
	wantCode(t, "ArchivedFeature(served)", err, feature.EConflict)
	g := next(f)
	wantCode(t, "UpdateFeature(archived)", s.UpdateFeature(ctx, g, versionOf(g)), feature.ENotFound)
	err = s.UpdateFeatureWith(ctx, "f", func(cur feature.Feature) (feature.Feature, rollout.Version, error) {
		n := next(cur)
		return n, versionOf(n), nil
	})
	wantCode(t, "UpdateFeatureWith(archived)", err, feature.ENotFound)
	again := newFeature("f")
	again.ID = "id-f-again"
	err = s.CreateFeature(ctx, again, versionOf(again))
	wantCode(t, "CreateFeature(archived key)", err, feature.EConflict)
	if msg := feature.ErrorMessage(err); !strings.Contains(msg, "archived") || !strings.Contains(msg, "restore") || !strings.Contains(msg, "purge") {
		t.Errorf("CreateFeature(archived key) says %q, want it to say the key is archived, to restore or purge it", msg)
	}
	wantCode(t, "ArchiveFeature(archived)", s.ArchiveFeature(ctx, "f", 2, audit.Event{Actor: "alice"}, nil, nil), feature.ENotFound)

	// Restored as version 3, from version 2 only.
	r := next(f)
	wantCode(t, "RestoreFeature(stale)", s.RestoreFeature(ctx, next(r), versionOf(next(r))), feature.EConflict)
	wantCode(t, "RestoreFeature(served)", s.RestoreFeature(ctx, next(keep), versionOf(next(keep))), feature.EConflict)
	v := versionOf(r)
	v.Kind = audit.Restore
	if err := s.RestoreFeature(ctx, r, v); err != nil {
		t.Fatalf("RestoreFeature(f) = %v", err)
	}
	if got := mustFeature(t, s, "f"); got.Version != 3 {
		t.Errorf("Feature(restored) is at version %d, want 3", got.Version)
	}
	wantFeatures(t, s, r, keep)

	// Archived again and purged: history and ramps gone, audit events kept.
	if err := s.CreateRamp(ctx, newRamp("ramp-f", r, t0), nil, nil); err != nil {
		t.Fatalf("CreateRamp() = %v", err)
	}
	if err := s.ArchiveFeature(ctx, "f", 3, audit.Event{Actor: "bob", Kind: audit.Archive}, nil, nil); err != nil {
		t.Fatalf("ArchiveFeature(f, 3) = %v", err)
	}
	if err := s.PurgeFeature(ctx, "f", audit.Event{Actor: "root", Kind: audit.Purge, Summary: "purged"}, nil); err != nil {
		t.Fatalf("PurgeFeature(f) = %v", err)
	}
	wantCode(t, "PurgeFeature(purged)", s.PurgeFeature(ctx, "f", audit.Event{Actor: "root"}, nil), feature.ENotFound)
	_, err = s.Versions(ctx, "f", 0, 0)
	wantCode(t, "Versions(purged)", err, feature.ENotFound)
	wantRamps(t, s, "f")
	if as, err := s.ArchivedFeatures(ctx); err != nil || len(as) != 0 {
		t.Errorf("ArchivedFeatures() after the purge = %v, %v; want none", as, err)
	}
	es := wantKinds(t, s, audit.Query{Feature: "f", Ascending: true},
		"create f", "change f", "archive f", "restore f", "ramp_create framp-f", "archive f", "purge f")
	if len(es) == 7 {
		if e := es[2]; e.Actor != "alice" || e.Comment != "done with it" || e.FeatureID != f.ID || e.Version != 2 {
			t.Errorf("archive event = %+v, want by alice, with its comment, of version 2 of %s", e, f.ID)
		}
		if e := es[6]; e.Actor != "root" || e.FeatureID != f.ID || e.Summary != "purged" {
			t.Errorf("purge event = %+v, want by root, of %s", e, f.ID)
		}
		if e := es[1]; e.Churn == nil || *e.Churn != 0.0625 || e.Version != 2 || e.Actor != "ops@example.com" || e.Summary == "" {
			t.Errorf("change event = %+v, want version 2's, churn 0.0625, by ops@example.com, with a summary", e)
		}
	}

	// The key is free again.
	create(t, s, again)
	wantKinds(t, s, audit.Query{Feature: "f", Kind: audit.Create}, "create f", "create f")
}

// testAuditTrail: every writing method records its event in its own
// transaction; refused writes record none; queries filter and page.
func testAuditTrail(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	f := newFeature("f")
	create(t, s, f)
	// Refused: nothing recorded.
	_ = s.CreateFeature(ctx, f, versionOf(f))
	g := next(next(f))
	_ = s.UpdateFeature(ctx, g, versionOf(g))
	g = next(f)
	gv := versionOf(g)
	gv.Kind = audit.Override
	if err := s.UpdateFeature(ctx, g, gv); err != nil {
		t.Fatalf("UpdateFeature() = %v", err)
	}
	tok := auth.Token{ID: "t1", Name: "ci", Role: auth.RoleEditor, Hash: "h1", CreatedAt: t0, CreatedBy: "alice"}
	if err := s.CreateToken(ctx, tok); err != nil {
		t.Fatalf("CreateToken() = %v", err)
	}
	_ = s.CreateToken(ctx, tok) // refused
	if err := s.RevokeToken(ctx, "ci", t0.Add(time.Hour), "bob"); err != nil {
		t.Fatalf("RevokeToken() = %v", err)
	}
	_ = s.RevokeToken(ctx, "ci", t0.Add(time.Hour), "bob") // refused

	// A ramp: created, paused by carol, resumed, a step that changes the
	// feature (its version's event alone), canceled.
	r := newRamp("r1", g, t0)
	if err := s.CreateRamp(ctx, r, nil, nil); err != nil {
		t.Fatalf("CreateRamp() = %v", err)
	}
	_ = s.CreateRamp(ctx, r, nil, nil) // refused
	move := func(state ramp.State, by string) {
		t.Helper()
		r.State, r.UpdatedBy, r.Revision, r.UpdatedAt = state, by, r.Revision+1, r.UpdatedAt.Add(time.Minute)
		if err := s.UpdateRamp(ctx, r, nil); err != nil {
			t.Fatalf("UpdateRamp(%s) = %v", state, err)
		}
	}
	move(ramp.Paused, "carol")
	move(ramp.Active, "carol")
	h := next(g)
	hv := versionOf(h)
	hv.Kind, hv.Actor = audit.RampStep, "ramp, started by ops@example.com"
	r.Next, r.Revision, r.UpdatedBy = r.Next+1, r.Revision+1, ""
	if err := s.ApplyRampStep(ctx, h, hv, r); err != nil {
		t.Fatalf("ApplyRampStep() = %v", err)
	}
	_ = s.ApplyRampStep(ctx, h, hv, r) // refused
	move(ramp.Canceled, "dave")

	all := wantKinds(t, s, audit.Query{Ascending: true},
		"create f", "override f", "token_create ci", "token_revoke ci",
		"ramp_create fr1", "ramp_pause fr1", "ramp_resume fr1", "ramp_step f", "ramp_cancel fr1")
	if len(all) != 9 {
		return
	}
	for i := 1; i < len(all); i++ {
		if all[i].ID <= all[i-1].ID {
			t.Errorf("event IDs %d then %d: want them growing", all[i-1].ID, all[i].ID)
		}
	}
	for i, who := range []string{"ops@example.com", "ops@example.com", "alice", "bob", "ops@example.com", "carol", "carol", "ramp, started by ops@example.com", "dave"} {
		if all[i].Actor != who {
			t.Errorf("event %d (%s) is by %q, want %q", i, all[i].Kind, all[i].Actor, who)
		}
		if all[i].Summary == "" || all[i].Time.IsZero() {
			t.Errorf("event %d (%s) = %+v, want a summary and a time", i, all[i].Kind, all[i])
		}
	}
	if got, want := all[3].Time, t0.Add(time.Hour).Truncate(time.Microsecond); !got.Truncate(time.Microsecond).Equal(want) {
		t.Errorf("token_revoke time = %v, want %v (PostgreSQL keeps microseconds)", got, want)
	}

	// Filters and pages.
	wantKinds(t, s, audit.Query{Actor: "carol"}, "ramp_resume fr1", "ramp_pause fr1")
	wantKinds(t, s, audit.Query{Kind: audit.TokenRevoke}, "token_revoke ci")
	wantKinds(t, s, audit.Query{Feature: "f", Kind: audit.RampStep}, "ramp_step f")
	wantKinds(t, s, audit.Query{Limit: 2}, "ramp_cancel fr1", "ramp_step f")
	wantKinds(t, s, audit.Query{Before: all[2].ID}, "override f", "create f")
	wantKinds(t, s, audit.Query{After: all[6].ID, Ascending: true}, "ramp_step f", "ramp_cancel fr1")
	wantKinds(t, s, audit.Query{After: all[1].ID, Before: all[3].ID}, "token_create ci")
	wantKinds(t, s, audit.Query{Feature: "nope"})
	// Since: the revoke is at t0+1h, the ramp's moves later; the version
	// events are at t0 and t0+1h.
	wantKinds(t, s, audit.Query{Since: t0.Add(time.Hour).Truncate(time.Microsecond), Kind: audit.TokenRevoke}, "token_revoke ci")
	wantKinds(t, s, audit.Query{Since: t0.Add(time.Hour + time.Microsecond), Kind: audit.TokenRevoke})

	// From another handle, the same trail.
	if diff := cmp.Diff(all, events(t, o.Open(t), audit.Query{Ascending: true})); diff != "" {
		t.Errorf("AuditEvents from another handle mismatch (-want +got):\n%s", diff)
	}
}

// testAuditAppendOnly: the database itself refuses to update or delete an
// audit event.
func testAuditAppendOnly(t *testing.T, o Opened) {
	if o.Exec == nil {
		t.Skip("the store gives no raw access to its database")
	}
	s := o.Store
	create(t, s, newFeature("f"))
	for _, stmt := range []string{
		`UPDATE audit_events SET actor = 'mallory'`,
		`DELETE FROM audit_events`,
	} {
		if err := o.Exec(t, stmt); err == nil {
			t.Errorf("%s succeeded, want it refused", stmt)
		}
	}
	wantKinds(t, s, audit.Query{}, "create f")
	if e := events(t, s, audit.Query{}); len(e) == 1 && e[0].Actor != "ops@example.com" {
		t.Errorf("actor = %q after a refused update, want ops@example.com", e[0].Actor)
	}
}
