package rollout

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/idempotency"
)

// IdempotencyStore keeps idempotency keys. Each method is atomic.
type IdempotencyStore interface {
	// ClaimIdempotency claims r.Key of r.Scope for r.Attempt, as a pending
	// record with r's fingerprint, lease and expiry, unless a record of the
	// key is there that has not expired (at now): then it returns that
	// record and false. A pending record of the same fingerprint whose
	// lease has ended at now is taken over: it is given r's attempt and
	// lease, and returned with true. A store that shares a database with
	// other processes waits for a transaction that is finishing the key.
	ClaimIdempotency(ctx context.Context, r idempotency.Record, now time.Time) (idempotency.Record, bool, error)
	// CompleteIdempotency settles s on its own, for a request that committed
	// no change (a dry run) or whose change did not carry it: it marks the
	// pending key s.Scope, s.Key held by s.Attempt done with s.Answer, to
	// expire at s.Expires. It returns idempotency.EKeyInUse when the key is
	// not so held.
	CompleteIdempotency(ctx context.Context, s idempotency.Settlement) error
	// ReleaseIdempotency deletes the key scope, key if it is still pending
	// and held by attempt: the request failed and may be sent again.
	ReleaseIdempotency(ctx context.Context, scope, key, attempt string) error
	// ExpireIdempotency deletes the records that expired at now, and
	// returns how many.
	ExpireIdempotency(ctx context.Context, now time.Time) (int64, error)
}

// ClaimIdempotency claims key of scope for a request of the given
// fingerprint. It returns the claim to run the request with, or the first
// answer of a request that already had the key (the claim is then nil), or
// idempotency.EKeyReused when the key is another request's,
// idempotency.EKeyInUse when a request with the key is still running.
func (s *Service) ClaimIdempotency(ctx context.Context, scope, key, fingerprint string) (*idempotency.Claim, []byte, error) {
	now := s.now().UTC()
	r := idempotency.Record{
		Scope: scope, Key: key, Fingerprint: fingerprint, Attempt: uuid.NewString(),
		LeaseUntil: now.Add(idempotency.Lease), Expires: now.Add(idempotency.Memory),
	}
	got, claimed, err := s.store.ClaimIdempotency(ctx, r, now)
	switch {
	case err != nil:
		return nil, nil, err
	case claimed:
		return &idempotency.Claim{Scope: scope, Key: key, Attempt: r.Attempt}, nil, nil
	case got.Fingerprint != fingerprint:
		return nil, nil, feature.Errorf(idempotency.EKeyReused, "Idempotency-Key %q was used for another request (another route, path, query, If-Match or body): use a new key for a new request", key)
	case !got.Done:
		return nil, nil, feature.Errorf(idempotency.EKeyInUse, "a request with Idempotency-Key %q is still running: retry once it has answered (after %s at most)", key, idempotency.Lease)
	}
	return nil, got.Answer, nil
}

// CompleteIdempotency keeps answer as the first answer of c's request,
// which committed no change that kept it (a dry run, say).
func (s *Service) CompleteIdempotency(ctx context.Context, c *idempotency.Claim, answer []byte) error {
	return s.store.CompleteIdempotency(ctx, idempotency.Settlement{Claim: *c, Answer: answer, Expires: s.now().UTC().Add(idempotency.Memory)})
}

// ReleaseIdempotency gives c's key up after its request failed, so that
// the request may be sent again with it. A key whose change was committed
// stays done.
func (s *Service) ReleaseIdempotency(ctx context.Context, c *idempotency.Claim) error {
	return s.store.ReleaseIdempotency(ctx, c.Scope, c.Key, c.Attempt)
}

// ExpireIdempotency deletes the idempotency keys that have expired.
func (s *Service) ExpireIdempotency(ctx context.Context) (int64, error) {
	return s.store.ExpireIdempotency(ctx, s.now().UTC())
}

// DefaultIdempotencySweep is how often ExpireIdempotencyEvery sweeps when
// given no interval.
const DefaultIdempotencySweep = time.Hour

// ExpireIdempotencyEvery deletes expired idempotency keys at once and then
// at every interval (0: DefaultIdempotencySweep) until ctx is done.
// Failures go to report (nil drops them).
func (s *Service) ExpireIdempotencyEvery(ctx context.Context, interval time.Duration, report func(error)) {
	if interval <= 0 {
		interval = DefaultIdempotencySweep
	}
	every(ctx, interval, true, func(ctx context.Context) error {
		if _, err := s.ExpireIdempotency(ctx); err != nil {
			return fmt.Errorf("expire idempotency keys: %w", err)
		}
		return nil
	}, report)
}
