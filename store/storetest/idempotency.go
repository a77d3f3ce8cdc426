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
)

// idemRecord is the record a request of fingerprint fp claiming key of
// scope as attempt at time at asks for.
func idemRecord(scope, key, fp, attempt string, at time.Time) rollout.IdempotencyRecord {
	return rollout.IdempotencyRecord{
		Scope: scope, Key: key, Fingerprint: fp, Attempt: attempt,
		LeaseUntil: at.Add(rollout.IdempotencyLease), Expires: at.Add(rollout.IdempotencyMemory),
	}
}

// claimKey calls ClaimIdempotency and checks whether it claimed the key.
func claimKey(t *testing.T, s Store, r rollout.IdempotencyRecord, now time.Time, want bool) rollout.IdempotencyRecord {
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

	later := now.Add(rollout.IdempotencyLease + time.Second)
	if got := claimKey(t, other, idemRecord("tok-1", "k1", "fp", "a3", later), later, true); got.Attempt != "a3" {
		t.Errorf("takeover returned attempt %q, want a3", got.Attempt)
	}
	answer := []byte(`{"status":201,"body":"e30K"}`)
	lost := rollout.IdempotencyRecord{Scope: "tok-1", Key: "k1", Attempt: "a1", Done: true, Answer: []byte("late"), Expires: later.Add(rollout.IdempotencyMemory)}
	wantCode(t, "CompleteIdempotency(attempt taken over)", s.CompleteIdempotency(ctx, lost), rollout.EKeyInUse)
	if err := s.ReleaseIdempotency(ctx, "tok-1", "k1", "a1"); err != nil {
		t.Fatalf("ReleaseIdempotency(attempt taken over) = %v", err)
	}
	if got := claimKey(t, s, idemRecord("tok-1", "k1", "fp", "a4", later), later, false); got.Attempt != "a3" || got.Done {
		t.Errorf("after the old attempt's release: %+v, want pending, held by a3", got)
	}
	done := rollout.IdempotencyRecord{Scope: "tok-1", Key: "k1", Attempt: "a3", Done: true, Answer: answer, Expires: later.Add(rollout.IdempotencyMemory)}
	if err := s.CompleteIdempotency(ctx, done); err != nil {
		t.Fatalf("CompleteIdempotency(a3) = %v", err)
	}
	wantCode(t, "CompleteIdempotency(done already)", s.CompleteIdempotency(ctx, done), rollout.EKeyInUse)
	almost := later.Add(rollout.IdempotencyMemory - time.Second)
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
		{now.Add(rollout.IdempotencyMemory - time.Millisecond), 0}, // PostgreSQL keeps microseconds
		{now.Add(rollout.IdempotencyMemory), 2},
		{later.Add(rollout.IdempotencyMemory - time.Second), 0},
		{later.Add(rollout.IdempotencyMemory), 1},
	} {
		n, err := s.ExpireIdempotency(ctx, tt.at)
		if err != nil || n != tt.want {
			t.Errorf("ExpireIdempotency(%v) = %d, %v; want %d", tt.at, n, err, tt.want)
		}
	}
	end := later.Add(rollout.IdempotencyMemory)
	claimKey(t, s, idemRecord("tok-1", "k1", "new", "d1", end), end, true)
	// An expired record not swept yet is claimed anew too.
	gone := end.Add(2 * rollout.IdempotencyMemory)
	claimKey(t, other, idemRecord("tok-1", "k1", "newer", "d2", gone), gone, true)
}

// testIdempotentWrite: a write whose context carries a settled claim
// commits the key as done with the claim's answer in its own transaction;
// a write whose claim was taken over commits nothing; a write that fails
// leaves the key pending.
func testIdempotentWrite(t *testing.T, o Opened) {
	s, other := o.Store, o.Open(t)
	f := newFeature("idem")
	create(t, s, f)
	encode := func(v any) ([]byte, error) {
		return fmt.Appendf(nil, "answer of version %d", v.(feature.Feature).Version), nil
	}
	withClaim := func(key, attempt string) (context.Context, *rollout.Claim) {
		c := &rollout.Claim{Scope: "tok", Key: key, Attempt: attempt, Encode: encode}
		return rollout.WithClaim(context.Background(), c), c
	}

	claimKey(t, s, idemRecord("tok", "w", "fp", "w1", t0), t0, true)
	ctx, claim := withClaim("w", "w1")
	g := next(f)
	rollout.Settle(ctx, g, t0)
	if err := s.UpdateFeature(ctx, g, versionOf(g)); err != nil {
		t.Fatalf("UpdateFeature(with a claim) = %v", err)
	}
	if !claim.IsCommitted() {
		t.Error("the claim is not committed after the write")
	}
	got := claimKey(t, other, idemRecord("tok", "w", "fp", "w2", t0.Add(time.Second)), t0.Add(time.Second), false)
	if want := "answer of version 2"; !got.Done || string(got.Answer) != want {
		t.Errorf("after the write the key is done %v with %q, want done with %q", got.Done, got.Answer, want)
	}
	rev := revisionOf(t, s)

	// Taken over before the write: the write commits nothing.
	claimKey(t, s, idemRecord("tok", "lost", "fp", "l1", t0), t0, true)
	after := t0.Add(rollout.IdempotencyLease + time.Second)
	claimKey(t, other, idemRecord("tok", "lost", "fp", "l2", after), after, true)
	ctx, claim = withClaim("lost", "l1")
	h := next(g)
	rollout.Settle(ctx, h, t0)
	wantCode(t, "UpdateFeature(claim taken over)", s.UpdateFeature(ctx, h, versionOf(h)), rollout.EKeyInUse)
	if claim.IsCommitted() {
		t.Error("a claim taken over is committed")
	}
	wantFeature(t, s, g)
	wantRevision(t, s, rev)

	// A write that fails (a stale version) leaves the key pending.
	claimKey(t, s, idemRecord("tok", "stale", "fp", "s1", t0), t0, true)
	ctx, claim = withClaim("stale", "s1")
	rollout.Settle(ctx, g, t0)
	wantCode(t, "UpdateFeature(stale, with a claim)", s.UpdateFeature(ctx, g, versionOf(g)), feature.EConflict)
	if got := claimKey(t, s, idemRecord("tok", "stale", "fp", "s2", t0), t0, false); got.Done || claim.IsCommitted() {
		t.Errorf("after a failed write the key is %+v (committed %v), want pending", got, claim.IsCommitted())
	}

	// The same for a delete; and a claim not settled is not written.
	claimKey(t, s, idemRecord("tok", "del", "fp", "d1", t0), t0, true)
	ctx, claim = withClaim("del", "d1")
	create(t, s, newFeature("other"))
	if claim.IsCommitted() {
		t.Error("a claim not settled was committed with a write")
	}
	rollout.Settle(ctx, g, t0)
	if err := s.ArchiveFeature(ctx, g.Key, g.Version, audit.Event{Actor: "test"}, nil); err != nil {
		t.Fatalf("ArchiveFeature(with a claim) = %v", err)
	}
	if got := claimKey(t, other, idemRecord("tok", "del", "fp", "d2", t0), t0, false); !got.Done || !claim.IsCommitted() {
		t.Errorf("after a delete with a claim the key is %+v (committed %v), want done", got, claim.IsCommitted())
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
