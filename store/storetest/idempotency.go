package storetest

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/idempotency"
	"github.com/rollout/rollout/rollout/ramp"
)

// idemRecord is the record a request of fingerprint fp claiming key of
// scope as attempt at time at asks for.
func idemRecord(scope, key, fp, attempt string, at time.Time) idempotency.Record {
	return idempotency.Record{
		Scope: scope, Key: key, Fingerprint: fp, Attempt: attempt,
		LeaseUntil: at.Add(idempotency.Lease), Expires: at.Add(idempotency.Memory),
	}
}

// claimKey calls ClaimIdempotency and checks whether it claimed the key.
func claimKey(t *testing.T, s Store, r idempotency.Record, now time.Time, want bool) idempotency.Record {
	t.Helper()
	got, claimed, err := s.ClaimIdempotency(context.Background(), r, now)
	if err != nil {
		t.Fatalf("ClaimIdempotency(%s %q as %s) = %v", r.Scope, r.Key, r.Attempt, err)
	}
	if claimed != want {
		t.Fatalf("ClaimIdempotency(%s %q as %s) claimed %v (record %+v), want %v", r.Scope, r.Key, r.Attempt, claimed, got, want)
	}
	return got
}

// testIdempotency: a key is claimed once, per scope; a retry within the
// lease finds it pending, with its fingerprint; after the lease a retry
// takes it over and the first attempt can no longer complete it; a
// completed key returns its answer to every handle until it expires; a
// released key may be claimed at once.
func testIdempotency(t *testing.T, o Opened) {
	ctx := context.Background()
	s, other := o.Store, o.Open(t)
	now := t0

	claimKey(t, s, idemRecord("tok-1", "k1", "fp", "a1", now), now, true)
	got := claimKey(t, other, idemRecord("tok-1", "k1", "fp", "a2", now.Add(time.Second)), now.Add(time.Second), false)
	if got.Done || got.Attempt != "a1" || got.Fingerprint != "fp" {
		t.Errorf("retry within the lease found %+v, want pending, attempt a1, fingerprint fp", got)
	}
	if got := claimKey(t, s, idemRecord("tok-1", "k1", "other", "a2", now), now, false); got.Fingerprint != "fp" {
		t.Errorf("another request with the key found fingerprint %q, want fp", got.Fingerprint)
	}
	claimKey(t, s, idemRecord("tok-2", "k1", "fp", "b1", now), now, true) // another token's key

	later := now.Add(idempotency.Lease + time.Second)
	if got := claimKey(t, other, idemRecord("tok-1", "k1", "fp", "a3", later), later, true); got.Attempt != "a3" {
		t.Errorf("takeover returned attempt %q, want a3", got.Attempt)
	}
	answer := []byte(`{"status":201,"body":"e30K"}`)
	lost := idempotency.Settlement{Claim: idempotency.Claim{Scope: "tok-1", Key: "k1", Attempt: "a1"}, Answer: []byte("late"), Expires: later.Add(idempotency.Memory)}
	wantCode(t, "CompleteIdempotency(attempt taken over)", s.CompleteIdempotency(ctx, lost), idempotency.EKeyInUse)
	if err := s.ReleaseIdempotency(ctx, "tok-1", "k1", "a1"); err != nil {
		t.Fatalf("ReleaseIdempotency(attempt taken over) = %v", err)
	}
	if got := claimKey(t, s, idemRecord("tok-1", "k1", "fp", "a4", later), later, false); got.Attempt != "a3" || got.Done {
		t.Errorf("after the old attempt's release: %+v, want pending, held by a3", got)
	}
	done := idempotency.Settlement{Claim: idempotency.Claim{Scope: "tok-1", Key: "k1", Attempt: "a3"}, Answer: answer, Expires: later.Add(idempotency.Memory)}
	if err := s.CompleteIdempotency(ctx, done); err != nil {
		t.Fatalf("CompleteIdempotency(a3) = %v", err)
	}
	wantCode(t, "CompleteIdempotency(done already)", s.CompleteIdempotency(ctx, done), idempotency.EKeyInUse)
	almost := later.Add(idempotency.Memory - time.Second)
	got = claimKey(t, other, idemRecord("tok-1", "k1", "fp", "a5", almost), almost, false)
	if !got.Done || !bytes.Equal(got.Answer, answer) {
		t.Errorf("retry of a completed key found done %v, answer %q; want done, %q", got.Done, got.Answer, answer)
	}
	if err := s.ReleaseIdempotency(ctx, "tok-1", "k1", "a3"); err != nil {
		t.Fatalf("ReleaseIdempotency(done) = %v", err)
	}
	if got := claimKey(t, s, idemRecord("tok-1", "k1", "fp", "a6", almost), almost, false); !got.Done {
		t.Errorf("a done key was released: %+v", got)
	}

	claimKey(t, s, idemRecord("tok-1", "k2", "fp", "c1", now), now, true)
	if err := other.ReleaseIdempotency(ctx, "tok-1", "k2", "c1"); err != nil {
		t.Fatalf("ReleaseIdempotency(pending) = %v", err)
	}
	claimKey(t, s, idemRecord("tok-1", "k2", "fp2", "c2", now), now, true)

	// Expiry: tok-2's k1 and k2 expire a day after now, k1 a day after
	// it was completed.
	for _, tt := range []struct {
		at   time.Time
		want int64
	}{
		{now.Add(idempotency.Memory - time.Millisecond), 0}, // PostgreSQL keeps microseconds
		{now.Add(idempotency.Memory), 2},
		{later.Add(idempotency.Memory - time.Second), 0},
		{later.Add(idempotency.Memory), 1},
	} {
		n, err := s.ExpireIdempotency(ctx, tt.at)
		if err != nil || n != tt.want {
			t.Errorf("ExpireIdempotency(%v) = %d, %v; want %d", tt.at, n, err, tt.want)
		}
	}
	end := later.Add(idempotency.Memory)
	claimKey(t, s, idemRecord("tok-1", "k1", "new", "d1", end), end, true)
	// An expired record not swept yet is claimed anew too.
	gone := end.Add(2 * idempotency.Memory)
	claimKey(t, other, idemRecord("tok-1", "k1", "newer", "d2", gone), gone, true)
}

// settlement is what a write of the request holding key as attempt
// carries to settle it with answer, to expire at settledExpires.
func settlement(key, attempt, answer string) *idempotency.Settlement {
	return &idempotency.Settlement{Claim: idempotency.Claim{Scope: "tok", Key: key, Attempt: attempt}, Answer: []byte(answer), Expires: settledExpires}
}

// settledExpires is a day after t0, in microseconds: PostgreSQL keeps no
// more.
var settledExpires = t0.Truncate(time.Microsecond).Add(idempotency.Memory)

// testIdempotentWrite: every write that carries a Settlement — in its
// Version, Ramp, Request or Batch, or as the settle argument of an
// archive, a purge or a segment's write — marks the key done with exactly the Settlement's
// answer in its own transaction. A write whose key was taken over meanwhile
// commits nothing: neither its change (no audit event, no commit) nor the
// key. A write that fails leaves the key pending.
func testIdempotentWrite(t *testing.T, o Opened) {
	ctx := context.Background()
	s, other := o.Store, o.Open(t)

	f := newFeature("idem")
	g := next(f)
	h := next(g)
	r := newRamp("ramp-idem", h, t0)
	paused := r.Clone()
	paused.Revision, paused.State, paused.Reason, paused.UpdatedBy = 2, ramp.Paused, "paused by ops", "ops"
	stepped, stepRamp := next(h), paused.Clone()
	stepRamp.Revision, stepRamp.Next = 3, 2
	stepRamp.Steps[1].Version = stepped.Version
	restored := next(stepped)
	staff := newSegment("staff-idem")
	staff2 := staff.Clone()
	staff2.Version, staff2.Description = 2, "changed"
	batched, batchedSeg := newFeature("idem-batch"), newSegment("staff-batch")

	for _, w := range []struct {
		name  string
		setup func() error // what the write needs that it does not do itself
		write func(settle *idempotency.Settlement) error
	}{
		{"CreateFeature", nil, func(st *idempotency.Settlement) error {
			v := versionOf(f)
			v.Settles = st
			return s.CreateFeature(ctx, f, v)
		}},
		{"UpdateFeature", nil, func(st *idempotency.Settlement) error {
			v := versionOf(g)
			v.Settles = st
			return s.UpdateFeature(ctx, g, v)
		}},
		{"UpdateFeatureWith", nil, func(st *idempotency.Settlement) error {
			return s.UpdateFeatureWith(ctx, h.Key, func(feature.Feature) (feature.Feature, rollout.Version, error) {
				v := versionOf(h)
				v.Settles = st
				return h, v, nil
			})
		}},
		{"CreateRamp", nil, func(st *idempotency.Settlement) error {
			return s.CreateRamp(ctx, r, nil, st)
		}},
		{"UpdateRamp", nil, func(st *idempotency.Settlement) error {
			return s.UpdateRamp(ctx, paused, st)
		}},
		{"ApplyRampStep", nil, func(st *idempotency.Settlement) error {
			v := versionOf(stepped)
			v.Settles = st
			return s.ApplyRampStep(ctx, stepped, v, stepRamp)
		}},
		{"CreateRequest", nil, func(st *idempotency.Settlement) error {
			req := newRequest("req-idem", f.Key, "ed", t0)
			req.Settles = st
			return s.CreateRequest(ctx, req)
		}},
		{"ArchiveFeature", nil, func(st *idempotency.Settlement) error {
			return s.ArchiveFeature(ctx, f.Key, stepped.Version, audit.Event{Actor: "test"}, nil, st)
		}},
		{"RestoreFeature", nil, func(st *idempotency.Settlement) error {
			v := versionOf(restored)
			v.Kind, v.Settles = audit.Restore, st
			return s.RestoreFeature(ctx, restored, v)
		}},
		{"PurgeFeature", func() error {
			return s.ArchiveFeature(ctx, f.Key, restored.Version, audit.Event{Actor: "test"}, nil, nil)
		}, func(st *idempotency.Settlement) error {
			return s.PurgeFeature(ctx, f.Key, audit.Event{Actor: "test"}, st)
		}},
		{"CreateSegment", nil, func(st *idempotency.Settlement) error {
			return s.CreateSegment(ctx, staff, segmentVersionOf(staff), st)
		}},
		{"UpdateSegment", nil, func(st *idempotency.Settlement) error {
			return s.UpdateSegment(ctx, staff2, segmentVersionOf(staff2), nil, st)
		}},
		{"DeleteSegment", nil, func(st *idempotency.Settlement) error {
			return s.DeleteSegment(ctx, staff2.Key, staff2.Version, rollout.SegmentEvent(audit.SegmentDelete, segmentVersionOf(staff2)), st)
		}},
		{"ApplyBatch", nil, func(st *idempotency.Settlement) error {
			return s.ApplyBatch(ctx, rollout.Batch{
				Features: []rollout.BatchWrite{{Feature: batched, Version: versionOf(batched), Create: true}},
				Segments: []rollout.SegmentWrite{{Segment: batchedSeg, Version: segmentVersionOf(batchedSeg), Create: true}},
				Settles:  st,
			})
		}},
	} {
		if w.setup != nil {
			if err := w.setup(); err != nil {
				t.Fatalf("before %s: %v", w.name, err)
			}
		}
		key, answer := "key-"+w.name, "the answer of "+w.name
		claimKey(t, s, idemRecord("tok", key, "fp", "first", t0), t0, true)
		// The first attempt's key is taken over before it writes: it
		// commits nothing.
		after := t0.Add(idempotency.Lease + time.Second)
		claimKey(t, other, idemRecord("tok", key, "fp", "retry", after), after, true)
		rev, events0 := revisionOf(t, s), len(events(t, s, audit.Query{}))
		wantCode(t, w.name+"(key taken over)", w.write(settlement(key, "first", "too late")), idempotency.EKeyInUse)
		if n := len(events(t, s, audit.Query{})); n != events0 {
			t.Errorf("%s(key taken over) recorded %d audit events, want none: its change was committed", w.name, n-events0)
		}
		wantRevision(t, s, rev)
		// The attempt that holds the key: the change, and the key done
		// with exactly its answer, seen from the other handle.
		if err := w.write(settlement(key, "retry", answer)); err != nil {
			t.Fatalf("%s(key held) = %v", w.name, err)
		}
		if n := len(events(t, s, audit.Query{})); n == events0 {
			t.Errorf("%s(key held) recorded no audit event", w.name)
		}
		got := claimKey(t, other, idemRecord("tok", key, "fp", "third", after), after, false)
		if !got.Done || string(got.Answer) != answer || !got.Expires.Equal(settledExpires) {
			t.Errorf("after %s the key is done %v with %q, expiring %v; want done with %q, expiring %v", w.name, got.Done, got.Answer, got.Expires, answer, settledExpires)
		}
	}
	wantRamps(t, s, r.Feature) // purged with the feature

	// A write that fails (a stale version) leaves the key pending.
	create(t, s, f)
	claimKey(t, s, idemRecord("tok", "stale", "fp", "s1", t0), t0, true)
	v := versionOf(f)
	v.Settles = settlement("stale", "s1", "never")
	wantCode(t, "UpdateFeature(stale, with a key)", s.UpdateFeature(ctx, f, v), feature.EConflict)
	if got := claimKey(t, other, idemRecord("tok", "stale", "fp", "s2", t0), t0, false); got.Done || got.Attempt != "s1" {
		t.Errorf("after a failed write the key is %+v, want pending, held by s1", got)
	}
}

func revisionOf(t *testing.T, s Store) int64 {
	t.Helper()
	rev, err := s.Revision(context.Background())
	if err != nil {
		t.Fatalf("Revision() = %v", err)
	}
	return rev
}

// testUpdateHeld: UpdateFeatureWith from two handles at once, each change
// made on the version it read, never conflicts, and every change lands; a
// missing feature is ENotFound; next's error is returned and nothing is
// written.
func testUpdateHeld(t *testing.T, o Opened) {
	ctx := context.Background()
	s, other := o.Store, o.Open(t)
	f := newFeature("held")
	create(t, s, f)
	const each = 10
	errs := make(chan error, 2*each)
	var wg sync.WaitGroup
	for i := range each {
		for j, h := range []Store{s, other} {
			wg.Go(func() {
				errs <- h.UpdateFeatureWith(ctx, "held", func(cur feature.Feature) (feature.Feature, rollout.Version, error) {
					g := next(cur)
					g.Overrides[fmt.Sprintf("user-%d-%d", j, i)] = "control"
					return g, versionOf(g), nil
				})
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("UpdateFeatureWith() at once = %v, want nil", err)
		}
	}
	got := mustFeature(t, other, "held")
	if got.Version != 1+2*each || len(got.Overrides) != len(f.Overrides)+2*each {
		t.Errorf("after %d held updates: version %d with %d overrides, want version %d with %d", 2*each, got.Version, len(got.Overrides), 1+2*each, len(f.Overrides)+2*each)
	}
	rev := revisionOf(t, s)
	refused := feature.Errorf(feature.EInvalid, "refused")
	err := s.UpdateFeatureWith(ctx, "held", func(cur feature.Feature) (feature.Feature, rollout.Version, error) {
		return feature.Feature{}, rollout.Version{}, refused
	})
	if err != refused {
		t.Errorf("UpdateFeatureWith(next fails) = %v, want next's error as is", err)
	}
	wantRevision(t, s, rev)
	err = s.UpdateFeatureWith(ctx, "missing", func(cur feature.Feature) (feature.Feature, rollout.Version, error) {
		t.Error("next called for a missing feature")
		return cur, rollout.Version{}, nil
	})
	wantCode(t, "UpdateFeatureWith(missing)", err, feature.ENotFound)
}
