package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/request"
	"github.com/rollout/rollout/rollout/settings"
)

// testSettings: defaults before any save, versioned saves with their audit
// event, a stale version refused and recording nothing, the same from
// another handle.
func testSettings(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	got, err := s.Settings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(settings.Default(), got); diff != "" {
		t.Fatalf("Settings() before any save (-want +got):\n%s", diff)
	}
	at := t0.Truncate(time.Microsecond)
	next := settings.Settings{MaxChurn: 0.1, RequireApproval: settings.ApprovalPolicy{Features: []string{"checkout"}}, Version: 1, UpdatedAt: &at, UpdatedBy: "alice"}
	e := audit.Event{Time: at, Actor: "alice", Kind: audit.Settings, Summary: "editors' churn limit 25 % → 10 %"}
	if err := s.SaveSettings(ctx, next, e); err != nil {
		t.Fatalf("SaveSettings(version 1) = %v", err)
	}
	wantCode(t, "SaveSettings(version 1 again)", s.SaveSettings(ctx, next, e), feature.EPrecondition)
	other := o.Open(t)
	got, err = other.Settings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(next, got); diff != "" {
		t.Fatalf("Settings() from another handle (-want +got):\n%s", diff)
	}
	next.Version, next.RequireApproval.All = 2, true
	if err := other.SaveSettings(ctx, next, e); err != nil {
		t.Fatalf("SaveSettings(version 2) = %v", err)
	}
	if got, _ := s.Settings(ctx); !got.RequireApproval.All || got.Version != 2 {
		t.Fatalf("Settings() = %+v, want version 2 with all", got)
	}
	events, err := s.AuditEvents(ctx, audit.Query{Kind: audit.Settings})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 2 || events[0].Actor != "alice" || events[0].Summary != e.Summary {
		t.Fatalf("settings events = %+v, want 2 by alice (the refused save records nothing)", events)
	}
}

func newRequest(id, key, author string, at time.Time) request.Request {
	replicas := 80
	return request.Request{
		ID: id, Feature: key, FeatureID: "id-" + key, State: request.Open, Author: author, CreatedAt: at,
		Comment: "ramp up", Change: request.Spec{Kind: request.SpecUpdateBucket, Name: "treatment", Replicas: &replicas},
		Summary: "changed bucket treatment: replicas to 80", IfMatch: "1-idf", BaseVersion: 1,
		Report: feature.Report{FromVersion: 1, ToVersion: 2, Method: "ring", Churn: 0.3,
			SharesBefore: map[string]float64{"control": 0.5, "treatment": 0.5}, SharesAfter: map[string]float64{"control": 0.2, "treatment": 0.8}},
	}
}

// testRequests: create, read, list by state and feature newest first,
// the per-author cap, reject, cancel, re-preview, a decided request
// refusing every further decision, approval applied with its version, and
// the audit events of each.
func testRequests(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	f := newFeature("checkout")
	create(t, s, f)
	r1 := newRequest("r1", "checkout", "alice", t0.Truncate(time.Microsecond))
	if err := s.CreateRequest(ctx, r1); err != nil {
		t.Fatalf("CreateRequest(r1) = %v", err)
	}
	wantCode(t, "CreateRequest(r1 again)", s.CreateRequest(ctx, r1), feature.EConflict)
	got, err := o.Open(t).Request(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r1, got); diff != "" {
		t.Fatalf("Request(r1) (-want +got):\n%s", diff)
	}
	_, err = s.Request(ctx, "nope")
	wantCode(t, "Request(nope)", err, feature.ENotFound)

	r2 := newRequest("r2", "other", "bob", r1.CreatedAt.Add(time.Minute))
	r3 := newRequest("r3", "checkout", "bob", r1.CreatedAt.Add(2*time.Minute))
	for _, r := range []request.Request{r2, r3} {
		if err := s.CreateRequest(ctx, r); err != nil {
			t.Fatalf("CreateRequest(%s) = %v", r.ID, err)
		}
	}
	ids := func(q request.Query) []string {
		t.Helper()
		rs, err := s.Requests(ctx, q)
		if err != nil {
			t.Fatalf("Requests(%+v) = %v", q, err)
		}
		out := []string{}
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	if diff := cmp.Diff([]string{"r3", "r2", "r1"}, ids(request.Query{State: request.Open})); diff != "" {
		t.Errorf("open requests (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"r3", "r1"}, ids(request.Query{Feature: "checkout"})); diff != "" {
		t.Errorf("requests of checkout (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"r3"}, ids(request.Query{Limit: 1})); diff != "" {
		t.Errorf("one request (-want +got):\n%s", diff)
	}

	// Reject r2, cancel r3: final.
	at := r1.CreatedAt.Add(time.Hour)
	if err := s.CloseRequest(ctx, "r2", request.Rejected, "carol", "too much", at); err != nil {
		t.Fatalf("CloseRequest(r2, rejected) = %v", err)
	}
	if err := s.CloseRequest(ctx, "r3", request.Canceled, "bob", "", at); err != nil {
		t.Fatalf("CloseRequest(r3, canceled) = %v", err)
	}
	wantCode(t, "CloseRequest(r2 again)", s.CloseRequest(ctx, "r2", request.Canceled, "bob", "", at), feature.EConflict)
	wantCode(t, "CloseRequest(nope)", s.CloseRequest(ctx, "nope", request.Canceled, "bob", "", at), feature.ENotFound)
	if got, _ := s.Request(ctx, "r2"); got.State != request.Rejected || got.DecidedBy != "carol" || got.Decision != "too much" || got.DecidedAt == nil || !got.DecidedAt.Equal(at) {
		t.Errorf("r2 after rejection = %+v", got)
	}
	if diff := cmp.Diff([]string{"r1"}, ids(request.Query{State: request.Open})); diff != "" {
		t.Errorf("open requests after decisions (-want +got):\n%s", diff)
	}

	// Re-preview r1, then apply it with a version.
	r1.IfMatch, r1.BaseVersion, r1.Repreviewed = "2-idf", 2, 1
	g := next(f)
	if err := s.UpdateFeature(ctx, g, versionOf(g)); err != nil {
		t.Fatal(err)
	}
	if err := s.RepreviewRequest(ctx, r1); err != nil {
		t.Fatalf("RepreviewRequest(r1) = %v", err)
	}
	wantCode(t, "RepreviewRequest(r2)", s.RepreviewRequest(ctx, request.Request{ID: "r2"}), feature.EConflict)
	h := next(g)
	v := versionOf(h)
	v.Actor = "alice, approved by carol"
	v.Request = &request.Decision{ID: "r1", By: "carol", Comment: "ok"}
	if err := s.UpdateFeature(ctx, h, v); err != nil {
		t.Fatalf("UpdateFeature(with approval of r1) = %v", err)
	}
	got, _ = s.Request(ctx, "r1")
	if got.State != request.Applied || got.AppliedVersion != 3 || got.DecidedBy != "carol" || got.IfMatch != "2-idf" || got.Repreviewed != 1 {
		t.Errorf("r1 after approval = %+v", got)
	}
	// An approval of a request decided meanwhile writes nothing.
	i := next(h)
	vi := versionOf(i)
	vi.Request = &request.Decision{ID: "r2", By: "carol"}
	wantCode(t, "UpdateFeature(with approval of rejected r2)", s.UpdateFeature(ctx, i, vi), feature.EConflict)
	if cur := mustFeature(t, s, "checkout"); cur.Version != 3 {
		t.Errorf("checkout is at version %d after a refused approval, want 3", cur.Version)
	}

	events, err := s.AuditEvents(ctx, audit.Query{Ascending: true})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range events {
		if e.Kind != audit.Create && e.Kind != audit.Change {
			kinds = append(kinds, fmt.Sprintf("%s %s by %s", e.Kind, e.Subject, e.Actor))
		}
	}
	want := []string{
		"request_create r1 by alice", "request_create r2 by bob", "request_create r3 by bob",
		"request_reject r2 by carol", "request_cancel r3 by bob", "request_approve r1 by carol",
	}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("request events (-want +got):\n%s", diff)
	}
}

// testRequestCap: an author may have request.MaxOpen open
// requests, even when they are made at once from several handles.
func testRequestCap(t *testing.T, o Opened) {
	ctx := context.Background()
	stores := []Store{o.Store, o.Open(t)}
	var wg sync.WaitGroup
	errs := make([]error, request.MaxOpen+5)
	for i := range errs {
		wg.Go(func() {
			r := newRequest(fmt.Sprintf("r%02d", i), "checkout", "alice", t0.Add(time.Duration(i)*time.Second))
			errs[i] = stores[i%2].CreateRequest(ctx, r)
		})
	}
	wg.Wait()
	ok, refused, made := 0, 0, ""
	for i, err := range errs {
		switch feature.ErrorCode(err) {
		case "":
			ok++
			made = fmt.Sprintf("r%02d", i) // which ones are made is the race's
		case feature.EConflict:
			refused++
		default:
			t.Errorf("CreateRequest = %v", err)
		}
	}
	if ok != request.MaxOpen || refused != 5 {
		t.Fatalf("%d made, %d refused; want %d and 5", ok, refused, request.MaxOpen)
	}
	if err := o.Store.CreateRequest(ctx, newRequest("bob1", "checkout", "bob", t0)); err != nil {
		t.Fatalf("another author's request = %v", err)
	}
	if err := o.Store.CloseRequest(ctx, made, request.Canceled, "alice", "", t0); err != nil {
		t.Fatal(err)
	}
	if err := o.Store.CreateRequest(ctx, newRequest("again", "checkout", "alice", t0)); err != nil {
		t.Fatalf("a request after one was canceled = %v", err)
	}
}
