package rollout

import (
	"encoding/json"

	"github.com/rollout/rollout/ring"
)

// Reasons for an evaluation's result.
const (
	ReasonRing     = "ring"     // the user's position on the feature's ring
	ReasonOverride = "override" // a per-user override
	ReasonDisabled = "disabled" // the kill switch is off: the fallback, or no bucket
)

// Evaluation is the bucket a feature serves one user. Bucket is "" and Value
// nil when the feature serves no bucket (disabled without a fallback).
type Evaluation struct {
	Feature string
	User    string
	Bucket  string
	Value   json.RawMessage
	Version int
	Reason  string
}

// compiled is a feature made ready for evaluation: its ring built, its values
// encoded. It is immutable once built.
type compiled struct {
	feature Feature
	ring    *ring.Ring
	values  map[string]json.RawMessage
	shares  map[string]float64
}

func compile(f Feature) *compiled {
	c := &compiled{feature: f, ring: f.Ring(), values: make(map[string]json.RawMessage, len(f.Buckets))}
	for _, b := range f.Buckets {
		c.values[b.Name] = b.ServedValue()
	}
	c.shares = c.ring.Shares()
	return c
}

func (c *compiled) evaluate(user string) Evaluation {
	f := &c.feature
	e := Evaluation{Feature: f.Key, User: user, Version: f.Version}
	switch bucket, ok := f.Overrides[user]; {
	case !f.Enabled:
		e.Reason = ReasonDisabled
		e.Bucket = f.Fallback
	case ok:
		e.Reason = ReasonOverride
		e.Bucket = bucket
	default:
		e.Reason = ReasonRing
		e.Bucket, _ = c.ring.LookupPosition(userPosition(f.Salt, user))
	}
	if e.Bucket != "" {
		e.Value = c.values[e.Bucket]
	}
	return e
}

// userPosition is the position of user on a ring salted with salt: the hash
// of salt + ":" + user, or of the bare user ID when the salt is empty, as the
// reference ring hashes keys. It does not allocate for short IDs.
func userPosition(salt, user string) ring.Position {
	if salt == "" {
		return ring.Hash(user)
	}
	var buf [192]byte
	return ring.HashBytes(append(append(append(buf[:0], salt...), ':'), user...))
}
