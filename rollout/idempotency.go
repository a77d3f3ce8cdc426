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
// its context (WithClaim), and the store's transaction that commits the
// change also marks the key done with the request's answer — both are
// committed or neither, so a change whose commit landed after its client
// gave up has its answer kept. A retry finds the key done and gets that
// answer again; one that finds the key pending gets EKeyInUse until the
// lease ends, after which it may take the key over: a takeover changes the
// key's attempt, so that the first attempt's transaction, if it ever comes,
// finds the key no longer its own and commits nothing.

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
	// CompleteIdempotency marks the pending key r.Scope, r.Key held by
	// r.Attempt done with r.Answer, to expire at r.Expires, for a request
	// that committed no change (a dry run) or whose change did not carry
	// the claim. It returns EKeyInUse when the key is not so held.
	CompleteIdempotency(ctx context.Context, r IdempotencyRecord) error
	// ReleaseIdempotency deletes the key scope, key if it is still pending
	// and held by attempt: the request failed and may be sent again.
	ReleaseIdempotency(ctx context.Context, scope, key, attempt string) error
	// ExpireIdempotency deletes the records that expired at now, and
	// returns how many.
	ExpireIdempotency(ctx context.Context, now time.Time) (int64, error)
}

// Claim is a request's hold on its idempotency key while it runs, carried
// in the context of its change (WithClaim). The store's transaction that
// commits the change also commits the key as done with the answer Encode
// makes of the value the change commits (its Result, or its Ramp), when
// the service has settled it (Settle). A Claim belongs to one request
// and is not safe for concurrent use.
type Claim struct {
	Scope, Key, Attempt string
	// Encode returns the answer to keep for v, what the change commits:
	// the same answer the request gives. When nil, the change commits
	// without the key, and the caller completes it after.
	Encode func(v any) ([]byte, error)

	value     any // what the change commits (Settle)
	settled   bool
	expires   time.Time
	committed bool
}

type claimKey struct{}

// WithClaim returns ctx carrying c.
func WithClaim(ctx context.Context, c *Claim) context.Context {
	return context.WithValue(ctx, claimKey{}, c)
}

// ClaimFrom returns the claim ctx carries, or nil.
func ClaimFrom(ctx context.Context) *Claim {
	c, _ := ctx.Value(claimKey{}).(*Claim)
	return c
}

// Settle records v as what the store write about to be made with ctx
// commits, if ctx carries a claim not committed yet; its answer is to
// expire IdempotencyMemory after now. The service calls it just before
// each store write of a change.
func Settle(ctx context.Context, v any, now time.Time) {
	if c := ClaimFrom(ctx); c != nil && !c.committed {
		c.value, c.settled, c.expires = v, true, now.Add(IdempotencyMemory)
	}
}

// Answer returns the record that a store's write transaction must commit
// with the change at hand (the key done, with its answer), and true; or
// false when there is none: no claim (c is nil), no settled change, no
// Encode, or the key is committed already.
func (c *Claim) Answer() (IdempotencyRecord, bool, error) {
	if c == nil || !c.settled || c.committed || c.Encode == nil {
		return IdempotencyRecord{}, false, nil
	}
	answer, err := c.Encode(c.value)
	if err != nil {
		return IdempotencyRecord{}, false, fmt.Errorf("encode the answer of Idempotency-Key %q: %w", c.Key, err)
	}
	return IdempotencyRecord{Scope: c.Scope, Key: c.Key, Attempt: c.Attempt, Done: true, Answer: answer, Expires: c.expires}, true, nil
}

// Committed tells c that a store committed its Answer with the change.
func (c *Claim) Committed() { c.committed = true }

// IsCommitted reports whether the key was committed with the change.
func (c *Claim) IsCommitted() bool { return c != nil && c.committed }

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
// which committed no change of its own (a dry run, say).
func (s *Service) CompleteIdempotency(ctx context.Context, c *Claim, answer []byte) error {
	return s.store.CompleteIdempotency(ctx, IdempotencyRecord{
		Scope: c.Scope, Key: c.Key, Attempt: c.Attempt, Done: true, Answer: answer,
		Expires: s.now().UTC().Add(IdempotencyMemory),
	})
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
