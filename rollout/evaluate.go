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
	// prefix is what the user ID is hashed after: the salt and ":", or
	// nothing when the salt is empty.
	prefix   string
	fallback int               // ring order of the fallback bucket; -1: none
	names    []string          // bucket names in ring order (sorted)
	values   []json.RawMessage // by ring order
	index    map[string]int    // bucket name → ring order
	shares   map[string]float64
	// served counts evaluations per bucket in ring order; the last counter
	// is for "no bucket".
	served []atomic.Int64
}

func compile(f Feature) *compiled {
	c := &compiled{feature: f, ring: f.Ring(), fallback: -1}
	if f.Salt != "" {
		c.prefix = f.Salt + ":"
	}
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
	if f.Fallback != "" {
		c.fallback = c.index[f.Fallback]
	}
	c.served = make([]atomic.Int64, len(buckets)+1)
	c.shares = c.ring.Shares()
	return c
}

// evaluateInto writes into e the bucket c serves user, and counts it. It
// does not allocate for user IDs that fit, with the salt, in 192 bytes (see
// userPosition).
func (c *compiled) evaluateInto(e *Evaluation, user string) {
	i, reason := c.assign(user)
	e.Feature, e.User, e.Version, e.Reason = c.feature.Key, user, c.feature.Version, reason
	if i < 0 {
		c.served[len(c.names)].Add(1)
		return
	}
	c.served[i].Add(1)
	e.Bucket, e.Value = c.names[i], c.values[i]
}

// peek is what c serves user, not counted.
func (c *compiled) peek(user string) Evaluation {
	i, reason := c.assign(user)
	e := Evaluation{Feature: c.feature.Key, User: user, Version: c.feature.Version, Reason: reason}
	if i >= 0 {
		e.Bucket, e.Value = c.names[i], c.values[i]
	}
	return e
}

// servedRing is the ring of what c serves: its own when enabled, else see
// Feature.servedRing.
func (c *compiled) servedRing() *ring.Ring {
	if c.feature.Enabled {
		return c.ring
	}
	return c.feature.servedRing()
}

// assign returns the ring order of the bucket c serves user, -1 for none,
// and why.
func (c *compiled) assign(user string) (int, string) {
	f := &c.feature
	if !f.Enabled {
		return c.fallback, ReasonDisabled
	}
	if len(f.Overrides) > 0 {
		if bucket, ok := f.Overrides[user]; ok {
			return c.index[bucket], ReasonOverride
		}
	}
	i, _ := c.ring.LookupIndex(userPosition(c.prefix, user))
	return i, ReasonRing
}

// userPosition is the position of user on a ring whose salt makes prefix
// (see compiled.prefix): the hash of salt + ":" + user, or of the bare user
// ID when the salt is empty, as the reference ring hashes keys. It does not
// allocate for IDs that fit, with the prefix, in 192 bytes.
func userPosition(prefix, user string) ring.Position {
	return ring.HashPrefixed(prefix, user)
}
