package rollout_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/document"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/idempotency"
	"github.com/rollout/rollout/rollout/ramp"
	"github.com/rollout/rollout/rollout/settings"
	"github.com/rollout/rollout/store"
	"github.com/rollout/rollout/store/sqlite"
)

// raceStore is the real store, whose UpdateFeature can be made to refuse
// writes as if another instance kept moving the feature on, or to commit
// a write and then report it failed, as when the database's answer to a
// commit is lost.
type raceStore struct {
	*store.DB
	conflicts atomic.Int32 // how many more UpdateFeatures to refuse
	lose      atomic.Bool  // the next UpdateFeature's answer is lost
}

func (s *raceStore) UpdateFeature(ctx context.Context, f feature.Feature, v rollout.Version) error {
	if s.conflicts.Add(-1) >= 0 {
		return feature.Errorf(feature.EConflict, "feature %q moved on (test)", f.Key)
	}
	if err := s.DB.UpdateFeature(ctx, f, v); err != nil {
		return err
	}
	if s.lose.CompareAndSwap(true, false) {
		return feature.Errorf(feature.EUnavailable, "the connection to the database failed (test)")
	}
	return nil
}

// keyed is a request's claim on its idempotency key, and the Idempotency
// that carries it in its change's options. Its Answer makes the answer of
// the change's result from its type and JSON, and remembers the last it
// made.
type keyed struct {
	t    *testing.T
	svc  *rollout.Service
	key  string
	idem *idempotency.Key
	last []byte // the last answer Answer made; nil: none
}

// answerOf is the answer keyed's Answer makes of result.
func answerOf(result any) ([]byte, error) {
	b, err := json.Marshal(result)
	return append(fmt.Appendf(nil, "%T ", result), b...), err
}

// claimKey claims key for a request and returns its keyed.
func claimKey(t *testing.T, svc *rollout.Service, key string) *keyed {
	t.Helper()
	c, first, err := svc.ClaimIdempotency(context.Background(), "tok", key, "fp-"+key)
	if err != nil || c == nil {
		t.Fatalf("ClaimIdempotency(%q) = %v, %q, %v; want a claim", key, c, first, err)
	}
	k := &keyed{t: t, svc: svc, key: key}
	k.idem = &idempotency.Key{Claim: *c, Answer: func(result any) ([]byte, error) {
		a, err := answerOf(result)
		k.last = a
		return a, err
	}}
	return k
}

// kept checks that the key is done with the answer made of result, what
// the change returned, and that this is the last answer Answer made: a
// retry of the request gets exactly those bytes.
func (k *keyed) kept(what string, result any) {
	k.t.Helper()
	want, err := answerOf(result)
	if err != nil {
		k.t.Fatal(err)
	}
	if !bytes.Equal(k.last, want) {
		k.t.Errorf("%s: the last answer made to keep is %s, want the answer of its result, %s", what, abbrev(k.last), abbrev(want))
	}
	c, first, err := k.svc.ClaimIdempotency(context.Background(), "tok", k.key, "fp-"+k.key)
	if err != nil || c != nil || !bytes.Equal(first, want) {
		k.t.Errorf("%s: a retry's ClaimIdempotency = claim %v, answer %s, %v; want no claim and the answer of its result, %s", what, c, abbrev(first), err, abbrev(want))
	}
}

// abbrev returns the start of an answer, quoted, and its length.
func abbrev(b []byte) string {
	if len(b) > 60 {
		return fmt.Sprintf("%q… (%d bytes)", b[:60], len(b))
	}
	return fmt.Sprintf("%q", b)
}

// pending checks that the key is still held by its request, no answer kept.
func (k *keyed) pending(what string) {
	k.t.Helper()
	if k.last != nil {
		k.t.Errorf("%s: an answer was made to keep with a change: %s", what, abbrev(k.last))
	}
	_, _, err := k.svc.ClaimIdempotency(context.Background(), "tok", k.key, "fp-"+k.key)
	if feature.ErrorCode(err) != idempotency.EKeyInUse {
		k.t.Errorf("%s: a retry's ClaimIdempotency = %v, want %s: the key pending", what, err, idempotency.EKeyInUse)
	}
}

// TestIdempotencyInOptions: every change given an idempotency key in its
// options (ChangeOptions, ApplyOptions, RampOptions) commits the key done
// with the answer made of its result, the one it returns, so that a retry
// of the request gets that answer — also when the change is made by
// holding the feature after lost races, when it becomes a change request,
// and when the database's answer to its commit is lost (the change and
// the key are committed together). A dry run keeps nothing: its key stays
// pending.
func TestIdempotencyInOptions(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st := &raceStore{DB: db}
	svc, err := rollout.NewService(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}

	k := claimKey(t, svc, "create")
	res, err := svc.Create(ctx, onOff("f", 1, 9), rollout.ChangeOptions{Idempotency: k.idem})
	if err != nil {
		t.Fatalf("Create = %v", err)
	}
	k.kept("Create", res)

	k = claimKey(t, svc, "change")
	if res, err = svc.Change(ctx, "f", change.SetOverride("alice", "on"), rollout.ChangeOptions{Idempotency: k.idem}); err != nil {
		t.Fatalf("Change = %v", err)
	}
	k.kept("Change", res)

	k = claimKey(t, svc, "dry run")
	if _, err = svc.Change(ctx, "f", change.SetOverride("bob", "on"), rollout.ChangeOptions{DryRun: true, Idempotency: k.idem}); err != nil {
		t.Fatalf("Change(dry run) = %v", err)
	}
	k.pending("Change(dry run)")

	st.conflicts.Store(1000) // every optimistic write loses: the change is made holding the feature
	k = claimKey(t, svc, "held")
	if res, err = svc.Change(ctx, "f", change.SetOverride("carol", "on"), rollout.ChangeOptions{Idempotency: k.idem}); err != nil {
		t.Fatalf("Change(held) = %v", err)
	}
	st.conflicts.Store(0)
	k.kept("Change(held)", res)

	st.lose.Store(true)
	k = claimKey(t, svc, "lost")
	if _, err = svc.Change(ctx, "f", change.SetOverride("dan", "on"), rollout.ChangeOptions{Idempotency: k.idem}); feature.ErrorCode(err) != feature.EUnavailable {
		t.Fatalf("Change(answer lost) = %v, want %s", err, feature.EUnavailable)
	}
	if f, err := db.Feature(ctx, "f"); err != nil || f.Overrides["dan"] != "on" {
		t.Fatalf("after the lost answer: %v, %v; want the change committed", f.Overrides, err)
	}
	if _, err := svc.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	lost, first, err := svc.ClaimIdempotency(ctx, "tok", "lost", "fp-lost")
	if err != nil || lost != nil || k.last == nil || !bytes.Equal(first, k.last) {
		t.Errorf("after the lost answer: claim %v, answer %s, %v; want the key done with the answer made, %s", lost, abbrev(first), err, abbrev(k.last))
	}

	k = claimKey(t, svc, "rollback")
	if res, err = svc.Rollback(ctx, "f", 1, rollout.ChangeOptions{Idempotency: k.idem}); err != nil {
		t.Fatalf("Rollback = %v", err)
	}
	k.kept("Rollback", res)

	k = claimKey(t, svc, "ramp")
	spec := ramp.Spec{Bucket: "on", Shares: []float64{0.5, 1}, Every: time.Hour}
	started, err := svc.StartRamp(ctx, "f", spec, rollout.RampOptions{Idempotency: k.idem})
	if err != nil {
		t.Fatalf("StartRamp = %v", err)
	}
	k.kept("StartRamp", started)
	for _, move := range []struct {
		name string
		move func(ctx context.Context, key, id string, opts rollout.RampOptions) (ramp.Ramp, error)
	}{{"PauseRamp", svc.PauseRamp}, {"ResumeRamp", svc.ResumeRamp}, {"CancelRamp", svc.CancelRamp}} {
		k = claimKey(t, svc, move.name)
		r, err := move.move(ctx, "f", started.Ramp.ID, rollout.RampOptions{Actor: "ops", Idempotency: k.idem})
		if err != nil {
			t.Fatalf("%s = %v", move.name, err)
		}
		k.kept(move.name, r)
	}

	// An editor's change and ramp where approvals are required become
	// change requests, which keep the answer.
	policy := settings.Default()
	policy.RequireApproval.Features = []string{"f"}
	if _, err := svc.UpdateSettings(ctx, policy, 0, "admin", ""); err != nil {
		t.Fatal(err)
	}
	k = claimKey(t, svc, "request")
	if res, err = svc.Change(ctx, "f", change.SetOverride("erin", "on"), rollout.ChangeOptions{Role: auth.RoleEditor, Idempotency: k.idem}); err != nil || res.Request == nil {
		t.Fatalf("Change(editor, approvals) = request %v, %v; want a change request", res.Request, err)
	}
	k.kept("Change(a change request)", res)
	k = claimKey(t, svc, "ramp request")
	spec.Role = auth.RoleEditor
	if started, err = svc.StartRamp(ctx, "f", spec, rollout.RampOptions{Actor: "ed", Idempotency: k.idem}); err != nil || started.Request == nil {
		t.Fatalf("StartRamp(editor, approvals) = request %v, %v; want a change request", started.Request, err)
	}
	k.kept("StartRamp(a change request)", started)

	k = claimKey(t, svc, "archive")
	if res, err = svc.Archive(ctx, "f", rollout.ChangeOptions{Idempotency: k.idem}); err != nil {
		t.Fatalf("Archive = %v", err)
	}
	k.kept("Archive", res)
	k = claimKey(t, svc, "restore")
	if res, err = svc.Restore(ctx, "f", rollout.ChangeOptions{Idempotency: k.idem}); err != nil {
		t.Fatalf("Restore = %v", err)
	}
	k.kept("Restore", res)
	if _, err := svc.Archive(ctx, "f", rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	k = claimKey(t, svc, "purge")
	if err := svc.Purge(ctx, "f", rollout.ChangeOptions{Idempotency: k.idem}); err != nil {
		t.Fatalf("Purge = %v", err)
	}
	k.kept("Purge", struct{}{})

	staff := feature.Segment{Key: "staff", Conditions: []feature.Condition{{Attribute: "email", Op: feature.OpEndsWith, Value: json.RawMessage(`"@example.com"`)}}}
	k = claimKey(t, svc, "segment")
	seg, err := svc.CreateSegment(ctx, staff, rollout.ChangeOptions{Idempotency: k.idem})
	if err != nil {
		t.Fatalf("CreateSegment = %v", err)
	}
	k.kept("CreateSegment", seg)
	k = claimKey(t, svc, "segment change")
	if seg, err = svc.UpdateSegment(ctx, "staff", "our people", staff.Conditions, rollout.ChangeOptions{Idempotency: k.idem}); err != nil {
		t.Fatalf("UpdateSegment = %v", err)
	}
	k.kept("UpdateSegment", seg)
	k = claimKey(t, svc, "segment deletion")
	if seg, err = svc.DeleteSegment(ctx, "staff", rollout.ChangeOptions{Idempotency: k.idem}); err != nil {
		t.Fatalf("DeleteSegment = %v", err)
	}
	k.kept("DeleteSegment", seg)

	doc := document.Document{Features: []document.Feature{{Key: "doc", Buckets: []document.Bucket{{Name: "on", Replicas: ptr(1)}}}}}
	k = claimKey(t, svc, "document")
	p, err := svc.ApplyDocument(ctx, doc, rollout.ApplyOptions{Idempotency: k.idem})
	if err != nil || !p.Applied {
		t.Fatalf("ApplyDocument = applied %v, %v", p.Applied, err)
	}
	k.kept("ApplyDocument", p)
	k = claimKey(t, svc, "document again")
	if p, err = svc.ApplyDocument(ctx, doc, rollout.ApplyOptions{Idempotency: k.idem}); err != nil || p.Applied {
		t.Fatalf("ApplyDocument(nothing to change) = applied %v, %v; want nothing applied", p.Applied, err)
	}
	k.pending("ApplyDocument(nothing to change)")
}
