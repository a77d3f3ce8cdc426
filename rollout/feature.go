package rollout

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/rollout/rollout/ring"
)

// Limits on what one feature may hold.
const (
	MaxReplicas       = 1000
	MaxPoints         = 10_000 // ring points per feature
	MaxBuckets        = 100
	MaxOverrides      = 10_000
	MaxDescription    = 1024
	MaxValueBytes     = 8 << 10
	MaxUserBytes      = 256
	MaxSaltBytes      = 128
	DefaultReplicas   = 100
	minUserBytes      = 1
	summaryValueLimit = 60
)

var (
	keyPattern    = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)
	bucketPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
)

// Bucket is one variant of a feature: a node of its ring.
type Bucket struct {
	Name     string `json:"name"`
	Replicas int    `json:"replicas"`
	// Value is what evaluation serves for the bucket, any JSON; empty means
	// the bucket's name as a JSON string.
	Value json.RawMessage `json:"value,omitempty"`
}

// ServedValue returns the JSON value served for the bucket.
func (b Bucket) ServedValue() json.RawMessage {
	if len(b.Value) == 0 {
		v, _ := json.Marshal(b.Name)
		return v
	}
	return b.Value
}

// Feature is a feature flag: its buckets on a consistent-hash ring, the salt
// that keys its users, a kill switch and per-user overrides. A Feature value
// is a configuration at one version; changes make new values.
type Feature struct {
	ID          string            `json:"id"`
	Key         string            `json:"key"`
	Description string            `json:"description"`
	Enabled     bool              `json:"enabled"`
	Salt        string            `json:"salt"`
	Fallback    string            `json:"fallback,omitempty"`
	Buckets     []Bucket          `json:"buckets"`
	Overrides   map[string]string `json:"overrides"`
	Version     int               `json:"version"`
	CreatedAt   time.Time         `json:"created_at"`
	UpdatedAt   time.Time         `json:"updated_at"`
}

// Clone returns a deep copy of f.
func (f Feature) Clone() Feature {
	f.Buckets = slices.Clone(f.Buckets)
	for i := range f.Buckets {
		f.Buckets[i].Value = slices.Clone(f.Buckets[i].Value)
	}
	overrides := make(map[string]string, len(f.Overrides))
	for u, b := range f.Overrides {
		overrides[u] = b
	}
	f.Overrides = overrides
	return f
}

// Bucket returns the named bucket.
func (f Feature) Bucket(name string) (Bucket, bool) {
	i := slices.IndexFunc(f.Buckets, func(b Bucket) bool { return b.Name == name })
	if i < 0 {
		return Bucket{}, false
	}
	return f.Buckets[i], true
}

// Validate reports the first thing wrong with f as an EInvalid *Error.
func (f Feature) Validate() error {
	if !keyPattern.MatchString(f.Key) {
		return Errorf(EInvalid, "feature key %q is invalid: use 1 to 64 characters of a-z, 0-9, '_', '.', '-', starting with a letter or digit", f.Key)
	}
	if len(f.Description) > MaxDescription || !utf8.ValidString(f.Description) {
		return Errorf(EInvalid, "description must be valid UTF-8 of at most %d bytes", MaxDescription)
	}
	if len(f.Salt) > MaxSaltBytes || !utf8.ValidString(f.Salt) {
		return Errorf(EInvalid, "salt must be valid UTF-8 of at most %d bytes", MaxSaltBytes)
	}
	if len(f.Buckets) == 0 {
		return Errorf(EInvalid, "a feature needs at least one bucket")
	}
	if len(f.Buckets) > MaxBuckets {
		return Errorf(EInvalid, "a feature has at most %d buckets, got %d", MaxBuckets, len(f.Buckets))
	}
	points := 0
	seen := make(map[string]bool, len(f.Buckets))
	for _, b := range f.Buckets {
		if err := b.Validate(); err != nil {
			return err
		}
		if seen[b.Name] {
			return Errorf(EInvalid, "bucket %q appears twice: bucket names must be unique", b.Name)
		}
		seen[b.Name] = true
		points += b.Replicas
	}
	if points > MaxPoints {
		return Errorf(EInvalid, "the buckets have %d replicas in all; a feature has at most %d ring points", points, MaxPoints)
	}
	if f.Fallback != "" && !seen[f.Fallback] {
		return Errorf(EInvalid, "fallback %q is not a bucket of the feature", f.Fallback)
	}
	if len(f.Overrides) > MaxOverrides {
		return Errorf(EInvalid, "a feature has at most %d overrides", MaxOverrides)
	}
	for user, bucket := range f.Overrides {
		if err := ValidateUser(user); err != nil {
			return err
		}
		if !seen[bucket] {
			return Errorf(EInvalid, "override for user %q names bucket %q, which the feature does not have", user, bucket)
		}
	}
	return nil
}

// Validate reports what is wrong with b as an EInvalid *Error.
func (b Bucket) Validate() error {
	if !bucketPattern.MatchString(b.Name) {
		return Errorf(EInvalid, "bucket name %q is invalid: use 1 to 64 characters of A-Z, a-z, 0-9, '_', '.', '-'", b.Name)
	}
	if b.Replicas < 1 || b.Replicas > MaxReplicas {
		return Errorf(EInvalid, "bucket %q has %d replicas: replicas must be between 1 and %d", b.Name, b.Replicas, MaxReplicas)
	}
	if len(b.Value) > MaxValueBytes {
		return Errorf(EInvalid, "the value of bucket %q is %d bytes; at most %d", b.Name, len(b.Value), MaxValueBytes)
	}
	if len(b.Value) > 0 && !json.Valid(b.Value) {
		return Errorf(EInvalid, "the value of bucket %q is not valid JSON", b.Name)
	}
	return nil
}

// ValidateUser reports whether u can be a user ID: 1 to 256 bytes of UTF-8.
func ValidateUser(u string) error {
	if len(u) < minUserBytes || len(u) > MaxUserBytes || !utf8.ValidString(u) {
		return Errorf(EInvalid, "user ID must be 1 to %d bytes of valid UTF-8", MaxUserBytes)
	}
	return nil
}

// Ring returns the ring of f's buckets, whether or not f is enabled.
func (f Feature) Ring() *ring.Ring {
	r, err := ring.New(ringBuckets(f.Buckets)...)
	if err != nil {
		// Validate refuses every bucket list ring.New refuses.
		panic("rollout: ring of a validated feature: " + err.Error())
	}
	return r
}

// servedRing returns the ring of what f serves: its buckets when enabled;
// when disabled, its fallback on every position, or nothing.
func (f Feature) servedRing() *ring.Ring {
	switch {
	case f.Enabled:
		return f.Ring()
	case f.Fallback != "":
		r, _ := ring.New(ring.Bucket{Name: f.Fallback, Replicas: 1})
		return r
	}
	return &ring.Ring{}
}

func ringBuckets(bs []Bucket) []ring.Bucket {
	out := make([]ring.Bucket, len(bs))
	for i, b := range bs {
		out[i] = ring.Bucket{Name: b.Name, Replicas: b.Replicas}
	}
	return out
}

// compactJSON returns v compacted, for stable storage and comparison.
func compactJSON(v json.RawMessage) json.RawMessage {
	if len(v) == 0 {
		return nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, v); err != nil {
		return v
	}
	return buf.Bytes()
}
