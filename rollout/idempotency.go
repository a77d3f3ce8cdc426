package rollout

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/rollout/rollout/rollout/feature"
)

// Idempotency keys. A change request may carry a key (the API's
// Idempotency-Key header) so that a client which lost the answer can send
// it again without the change applying twice. The request first claims the
// key (Service.ClaimIdempotency): the store records it as pending, held by
// the request's attempt for a lease. The change then carries the claim in
// its options (ChangeOptions.Idempotency, ApplyOptions.Idempotency,
// RampOptions.Idempotency), with the function that makes the request's
// answer of the change's result. The service makes that answer once, just
// before the store write that commits the change, and hands it to the
// store in the value it writes (a Settlement); the write's transaction
// also marks the key done with it — both are committed or neither, so a
// change whose commit landed after its client gave up has its answer
// kept. A retry finds the key done and gets that answer again; one that
// finds the key pending gets EKeyInUse until the lease ends, after which
// it may take the key over: a takeover changes the key's attempt, so that
// the first attempt's transaction, if it ever comes, finds the key no
// longer its own and commits nothing.

// Error codes of idempotency keys.
const (
	// EKeyReused: the key was used for another request (another method,
	// route, path, query, If-Match or body).
	EKeyReused = "idempotency_key_reused"
	// EKeyInUse: a request with the key is still running.
	EKeyInUse = "idempotency_key_in_use"
)

// IdempotencyMemory is how long the answer of a request with an
// idempotency key is kept after it was given, and so how long a client may
// retry the request without it applying twice.
const IdempotencyMemory = 24 * time.Hour

// IdempotencyLease is how long a claimed key is held by the request that
// claimed it: a retry within it is told the request is still running.
const IdempotencyLease = 30 * time.Second

// MaxIdempotencyKey is the longest key, in bytes.
const MaxIdempotencyKey = 255

// IdempotencyRecord is a stored idempotency key.
type IdempotencyRecord struct {
	Scope       string // whose key it is: the token's ID; "" on an open server
	Key         string
	Fingerprint string // a hash of the request, to refuse the key for another one
	Attempt     string // the attempt that holds a pending key
	Done        bool
	Answer      []byte // the first answer, once done; the API's encoding
	// LeaseUntil is when a pending key may be taken over.
	LeaseUntil time.Time
	// Expires is when the record may be deleted.
	Expires time.Time
}

// IdempotencyStore keeps idempotency keys. Each method is atomic.
type IdempotencyStore interface {
	// ClaimIdempotency claims r.Key of r.Scope for r.Attempt, as a pending
	// record with r's fingerprint, lease and expiry, unless a record of the
	// key is there that has not expired (at now): then it returns that
	// record and false. A pending record of the same fingerprint whose
	// lease has ended at now is taken over: it is given r's attempt and
	// lease, and returned with true. A store that shares a database with
	// other processes waits for a transaction that is finishing the key.
	ClaimIdempotency(ctx context.Context, r IdempotencyRecord, now time.Time) (IdempotencyRecord, bool, error)
	// CompleteIdempotency settles s on its own, for a request that
	// committed no change (a dry run) or whose change did not carry it:
	// it marks the pending key s.Scope, s.Key held by s.Attempt done with
	// s.Answer, to expire at s.Expires. It returns EKeyInUse when the key
	// is not so held.
	CompleteIdempotency(ctx context.Context, s Settlement) error
	// ReleaseIdempotency deletes the key scope, key if it is still pending
	// and held by attempt: the request failed and may be sent again.
	ReleaseIdempotency(ctx context.Context, scope, key, attempt string) error
	// ExpireIdempotency deletes the records that expired at now, and
	// returns how many.
	ExpireIdempotency(ctx context.Context, now time.Time) (int64, error)
}

// Claim is a request's hold on its idempotency key while it runs
// (Service.ClaimIdempotency).
type Claim struct {
	Scope   string // whose key it is: the token's ID; "" on an open server
	Key     string
	Attempt string // the request's attempt, which holds the pending key
}

// Idempotency is the idempotency key of a change, carried in the change's
// options: the request's claim on the key, and how to answer the change.
// A method given one makes the answer of its result with Answer once,
// just before the store write that commits its change, and that write
// marks the key done with it in the change's transaction (Settlement). So
// when the method returns no error, the change and the answer Answer
// last returned are committed together; when it returns an error, a
// change it committed (its answer lost in the database's reply) has its
// answer committed with it. A method that commits no change (a dry run,
// a document with nothing to change) does not call Answer, and keeps
// nothing: the caller keeps the answer it gives itself
// (Service.CompleteIdempotency).
type Idempotency struct {
	Claim
	// Answer returns the answer to keep for result, what the change's
	// method returns (a Result; a SegmentResult; a document.Plan; a
	// RampStart or a Ramp; struct{}{} for Purge): the bytes the request
	// answers with. It may be called more than once, when the method
	// tries its write again on a newer version.
	Answer func(result any) ([]byte, error)
}

// Settlement is an idempotency key marked done with its answer by the
// store write that carries it (Version.Settles, Ramp.Settles,
// Request.Settles, Batch.Settles, and the settle argument of archives,
// purges and the writes of segments), in the transaction that commits the write's
// change: both are committed or neither. The write fails with EKeyInUse,
// committing nothing, when the key is no longer pending and held by
// Attempt (a retry took it over after its lease, or it expired).
type Settlement struct {
	Claim
	Answer  []byte    // the request's answer, as the API encodes it
	Expires time.Time // when the key's record may be deleted
}

// settlement returns the Settlement of k that the store write committing
// result carries: the key done with Answer's answer to result, kept until
// IdempotencyMemory after now, the change's time. It returns nil when k
// is nil: the change carries no key.
func (k *Idempotency) settlement(result any, now time.Time) (*Settlement, error) {
	if k == nil {
		return nil, nil
	}
	if k.Answer == nil {
		return nil, fmt.Errorf("keep the answer of Idempotency-Key %q: its Idempotency has no Answer", k.Key)
	}
	answer, err := k.Answer(result)
	if err != nil {
		return nil, fmt.Errorf("encode the answer of Idempotency-Key %q: %w", k.Key, err)
	}
	return &Settlement{Claim: k.Claim, Answer: answer, Expires: now.Add(IdempotencyMemory)}, nil
}

// ClaimIdempotency claims key of scope for a request of the given
// fingerprint. It returns the claim to run the request with, or the first
// answer of a request that already had the key (the claim is then nil), or
// EKeyReused when the key is another request's, EKeyInUse when a request
// with the key is still running.
func (s *Service) ClaimIdempotency(ctx context.Context, scope, key, fingerprint string) (*Claim, []byte, error) {
	now := s.now().UTC()
	r := IdempotencyRecord{
		Scope: scope, Key: key, Fingerprint: fingerprint, Attempt: uuid.NewString(),
		LeaseUntil: now.Add(IdempotencyLease), Expires: now.Add(IdempotencyMemory),
	}
	got, claimed, err := s.store.ClaimIdempotency(ctx, r, now)
	switch {
	case err != nil:
		return nil, nil, err
	case claimed:
		return &Claim{Scope: scope, Key: key, Attempt: r.Attempt}, nil, nil
	case got.Fingerprint != fingerprint:
		return nil, nil, feature.Errorf(EKeyReused, "Idempotency-Key %q was used for another request (another route, path, query, If-Match or body): use a new key for a new request", key)
	case !got.Done:
		return nil, nil, feature.Errorf(EKeyInUse, "a request with Idempotency-Key %q is still running: retry once it has answered (after %s at most)", key, IdempotencyLease)
	}
	return nil, got.Answer, nil
}

// CompleteIdempotency keeps answer as the first answer of c's request,
// which committed no change that kept it (a dry run, say).
func (s *Service) CompleteIdempotency(ctx context.Context, c *Claim, answer []byte) error {
	return s.store.CompleteIdempotency(ctx, Settlement{Claim: *c, Answer: answer, Expires: s.now().UTC().Add(IdempotencyMemory)})
}

// ReleaseIdempotency gives c's key up after its request failed, so that
// the request may be sent again with it. A key whose change was committed
// stays done.
func (s *Service) ReleaseIdempotency(ctx context.Context, c *Claim) error {
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
