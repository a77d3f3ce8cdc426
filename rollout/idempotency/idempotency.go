// Package idempotency is what rollout makes of idempotency keys.
//
// A change request may carry a key (the API's Idempotency-Key header) so
// that a client which lost the answer can send it again without the change
// applying twice. The request first claims the key
// (rollout.Service.ClaimIdempotency): the store records it as pending,
// held by the request's attempt for a lease. The change then carries the
// claim in its options (rollout's ChangeOptions.Idempotency,
// ApplyOptions.Idempotency, RampOptions.Idempotency: a Key), with the
// function that makes the request's answer of the change's result. The
// service makes that answer once, just before the store write that commits
// the change, and hands it to the store in the value it writes (a
// Settlement); the write's transaction also marks the key done with it —
// both are committed or neither, so a change whose commit landed after its
// client gave up has its answer kept. A retry finds the key done and gets
// that answer again; one that finds the key pending gets EKeyInUse until
// the lease ends, after which it may take the key over: a takeover changes
// the key's attempt, so that the first attempt's transaction, if it ever
// comes, finds the key no longer its own and commits nothing.
//
// The package is this file: the keys' error codes and limits, the stored
// record (Record, which rollout.IdempotencyStore keeps), a request's
// Claim, the Key a change carries, and the Settlement its write commits.
package idempotency

import (
	"fmt"
	"time"
)

// Error codes of idempotency keys.
const (
	// EKeyReused: the key was used for another request (another method,
	// route, path, query, If-Match or body).
	EKeyReused = "idempotency_key_reused"
	// EKeyInUse: a request with the key is still running.
	EKeyInUse = "idempotency_key_in_use"
)

// Memory is how long the answer of a request with an idempotency key is
// kept after it was given, and so how long a client may retry the request
// without it applying twice.
const Memory = 24 * time.Hour

// Lease is how long a claimed key is held by the request that claimed it:
// a retry within it is told the request is still running.
const Lease = 30 * time.Second

// MaxKey is the longest key, in bytes.
const MaxKey = 255

// Record is a stored idempotency key.
type Record struct {
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

// Claim is a request's hold on its idempotency key while it runs
// (rollout.Service.ClaimIdempotency).
type Claim struct {
	Scope   string // whose key it is: the token's ID; "" on an open server
	Key     string
	Attempt string // the request's attempt, which holds the pending key
}

// Key is the idempotency key of a change, carried in the change's
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
// (rollout.Service.CompleteIdempotency).
type Key struct {
	Claim
	// Answer returns the answer to keep for result, what the change's
	// method returns (a Result; a SegmentResult; a document.Plan; a
	// RampStart or a Ramp; struct{}{} for Purge): the bytes the request
	// answers with. It may be called more than once, when the method
	// tries its write again on a newer version.
	Answer func(result any) ([]byte, error)
}

// Settlement is an idempotency key marked done with its answer by the
// store write that carries it (rollout's Version.Settles, Ramp.Settles,
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

// Settle returns the Settlement of k that the store write committing
// result carries: the key done with Answer's answer to result, kept until
// Memory after now, the change's time. It returns nil when k
// is nil: the change carries no key.
func (k *Key) Settle(result any, now time.Time) (*Settlement, error) {
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
	return &Settlement{Claim: k.Claim, Answer: answer, Expires: now.Add(Memory)}, nil
}
