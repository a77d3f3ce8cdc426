package rollout

import (
	"encoding/json"
	"sync/atomic"

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

// compiled is a feature at one version made ready for evaluation: its ring
// built, its values encoded, and a counter of the evaluations served per
// bucket. Everything but the counters is immutable once built.
type compiled struct {
	feature Feature
	ring    *ring.Ring
	names   []string          // bucket names in ring order (sorted)
	values  []json.RawMessage // by ring order
	index   map[string]int    // bucket name → ring order
	shares  map[string]float64
	// served counts evaluations per bucket in ring order; the last counter
	// is for "no bucket".
	served []atomic.Int64
}

func compile(f Feature) *compiled {
	c := &compiled{feature: f, ring: f.Ring()}
	buckets := c.ring.Buckets()
	c.names = make([]string, len(buckets))
	c.values = make([]json.RawMessage, len(buckets))
	c.index = make(map[string]int, len(buckets))
	for i, b := range buckets {
		c.names[i] = b.Name
		c.index[b.Name] = i
		fb, _ := f.Bucket(b.Name)
		c.values[i] = fb.ServedValue()
	}
	c.served = make([]atomic.Int64, len(buckets)+1)
	c.shares = c.ring.Shares()
	return c
}

func (c *compiled) evaluate(user string) Evaluation {
	f := &c.feature
	e := Evaluation{Feature: f.Key, User: user, Version: f.Version}
	i := -1
	switch bucket, ok := f.Overrides[user]; {
	case !f.Enabled:
		e.Reason = ReasonDisabled
		if f.Fallback != "" {
			i = c.index[f.Fallback]
		}
	case ok:
		e.Reason = ReasonOverride
		i = c.index[bucket]
	default:
		e.Reason = ReasonRing
		i, _ = c.ring.LookupIndex(userPosition(f.Salt, user))
	}
	if i < 0 {
		c.served[len(c.names)].Add(1)
		return e
	}
	c.served[i].Add(1)
	e.Bucket, e.Value = c.names[i], c.values[i]
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
