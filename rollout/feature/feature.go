package feature

import (
	"bytes"
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/rollout/rollout/ring"
)

// Limits on what one feature may hold.
const (
	MaxReplicas       = 20_000
	MaxPoints         = 20_000 // ring points per feature
	MaxBuckets        = 100
	MaxOverrides      = 10_000
	MaxDescription    = 1024
	MaxValueBytes     = 8 << 10
	MaxValueDepth     = 64 // arrays and objects nested in a bucket value
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
	// Rules are the feature's targeting rules, in order (see rules.go);
	// BucketBy is the context attribute its ring hashes instead of the
	// user ID ("": the user ID).
	Rules    []Rule `json:"rules,omitempty"`
	BucketBy string `json:"bucket_by,omitempty"`
	// Prerequisites are the features that must serve the user some of
	// their buckets for this one to serve its own (prerequisite.go).
	Prerequisites []Prerequisite `json:"prerequisites,omitempty"`
	// Tags and Owner help people find and look after features.
	Tags      []string  `json:"tags,omitempty"`
	Owner     string    `json:"owner,omitempty"`
	Version   int       `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
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
	if f.Rules != nil {
		rules := make([]Rule, len(f.Rules))
		for i, r := range f.Rules {
			r.Conditions = cloneConditions(r.Conditions)
			r.Serve = r.Serve.Clone()
			rules[i] = r
		}
		f.Rules = rules
	}
	f.Tags = slices.Clone(f.Tags)
	f.Prerequisites = ClonePrerequisites(f.Prerequisites)
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
func (f Feature) Validate() error { return f.validate(true, false) }

// ValidateStored is Validate for a configuration read from a store, which
// releases before today's limits may have written: it lets through matches
// patterns over their limits (which compile as conditions that never
// hold), and, unless strict, bucket values that strict JSON clients cannot
// read and NUL bytes in overridden user IDs. Such a database still loads,
// and the next change to the feature must replace them.
func (f Feature) ValidateStored(strict bool) error { return f.validate(strict, true) }

// validate is Validate; with strict false it lets through bucket values
// that strict JSON clients cannot read, and with stored matches patterns
// over their limits (which compile as conditions that never hold), which
// features stored before they were refused may hold: such a database
// still loads, and the next change to the feature must replace them.
func (f Feature) validate(strict, stored bool) error {
	if !ValidKey(f.Key) {
		return invalidAt("key", "feature key %q is invalid: use 1 to 64 characters of a-z, 0-9, '_', '.', '-', starting with a letter or digit", f.Key)
	}
	if err := validateDescription(f.Description); err != nil {
		return err
	}
	if len(f.Salt) > MaxSaltBytes || !utf8.ValidString(f.Salt) {
		return invalidAt("salt", "salt must be valid UTF-8 of at most %d bytes", MaxSaltBytes)
	}
	if err := validateLabels(f.Tags, f.Owner); err != nil {
		return err
	}
	if len(f.Buckets) == 0 {
		return invalidAt("buckets", "a feature needs at least one bucket")
	}
	if len(f.Buckets) > MaxBuckets {
		return invalidAt("buckets", "a feature has at most %d buckets, got %d", MaxBuckets, len(f.Buckets))
	}
	points := 0
	seen := make(map[string]bool, len(f.Buckets))
	for i, b := range f.Buckets {
		if err := b.validate(strict); err != nil {
			return within(err, listField("buckets", i))
		}
		if seen[b.Name] {
			return invalidAt(listField("buckets", i)+".name", "bucket %q appears twice: bucket names must be unique", b.Name)
		}
		seen[b.Name] = true
		points += b.Replicas
	}
	if points > MaxPoints {
		return invalidAt("buckets", "the buckets have %d replicas in all; a feature has at most %d ring points", points, MaxPoints)
	}
	if points == 0 {
		// A bucket with 0 replicas serves no one but stays (a ramp's or
		// a dormant variant's); a ring with no point would serve no one.
		return invalidAt("buckets", "every bucket has 0 replicas: give at least one bucket replicas, so that the feature serves its users")
	}
	if f.Fallback != "" && !seen[f.Fallback] {
		return invalidAt("fallback", "fallback %q is not a bucket of the feature", f.Fallback)
	}
	if err := validateTargeting(&f, seen, stored); err != nil {
		return err
	}
	if err := validatePrerequisites(&f); err != nil {
		return err
	}
	if len(f.Overrides) > MaxOverrides {
		return invalidAt("overrides", "a feature has at most %d overrides", MaxOverrides)
	}
	for user, bucket := range f.Overrides {
		if validateUser(user, strict) != nil || !seen[bucket] {
			return f.overrideError(seen, strict)
		}
	}
	return nil
}

// validateDescription reports what is wrong with the description of a
// feature or a segment: it is at most MaxDescription bytes of UTF-8.
func validateDescription(d string) error {
	if len(d) > MaxDescription || !utf8.ValidString(d) {
		return invalidAt("description", "description must be valid UTF-8 of at most %d bytes", MaxDescription)
	}
	return nil
}

// overrideError reports the first of f's overrides, in the order of their
// user IDs, whose user ID is invalid or whose bucket (seen: f's) is not
// f's, so that the same configuration always reports the same one.
func (f Feature) overrideError(seen map[string]bool, strict bool) error {
	for _, user := range slices.Sorted(maps.Keys(f.Overrides)) {
		at := "overrides[" + strconv.Quote(user) + "]"
		if err := validateUser(user, strict); err != nil {
			return within(err, at)
		}
		if bucket := f.Overrides[user]; !seen[bucket] {
			return invalidAt(at, "override for user %q names bucket %q, which the feature does not have", user, bucket)
		}
	}
	return nil
}

// listField is the path of entry i of the list field name: "buckets[1]".
func listField(name string, i int) string { return name + "[" + strconv.Itoa(i) + "]" }

// Validate reports what is wrong with b as an EInvalid *Error whose Field
// is within the bucket (name, replicas, value). A value must be JSON that
// strict clients can read: UTF-8, surrogates escaped in pairs, numbers
// within the range of a float64.
func (b Bucket) Validate() error { return b.validate(true) }

func (b Bucket) validate(strict bool) error {
	if !ValidBucketName(b.Name) {
		return invalidAt("name", "bucket name %q is invalid: use 1 to 64 characters of A-Z, a-z, 0-9, '_', '.', '-'", b.Name)
	}
	if b.Replicas < 0 || b.Replicas > MaxReplicas {
		return invalidAt("replicas", "bucket %q has %d replicas: replicas must be between 0 and %d", b.Name, b.Replicas, MaxReplicas)
	}
	if len(b.Value) > MaxValueBytes {
		return invalidAt("value", "the value of bucket %q is %d bytes; at most %d", b.Name, len(b.Value), MaxValueBytes)
	}
	if len(b.Value) > 0 && !json.Valid(b.Value) {
		return invalidAt("value", "the value of bucket %q is not valid JSON", b.Name)
	}
	if strict && len(b.Value) > 0 {
		if err := strictJSON(b.Value); err != "" {
			return invalidAt("value", "the value of bucket %q %s: strict JSON clients could not read it", b.Name, err)
		}
		if d := jsonDepth(b.Value); d > MaxValueDepth {
			return invalidAt("value", "the value of bucket %q nests arrays and objects %d deep; at most %d", b.Name, d, MaxValueDepth)
		}
	}
	return nil
}

// ReadableJSON reports whether strict JSON clients can read v, which is
// valid JSON: it is UTF-8, escapes surrogates only in pairs, and holds no
// number beyond the range of a float64. Go's encoding/json silently turns
// the bytes and lone surrogates it cannot read into U+FFFD, so callers that
// decode what others send check the raw text with it first.
func ReadableJSON(v []byte) bool { return strictJSON(v) == "" }

// strictJSON says what in v, which is valid JSON, a strict client cannot
// read (Go's encoding/json fails on it, and others garble it), or "": bytes
// that are not UTF-8, an escaped surrogate without its pair, or a number
// beyond the range of a float64.
func strictJSON(v []byte) string {
	if !utf8.Valid(v) {
		return "holds bytes that are not UTF-8"
	}
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"':
			for i++; v[i] != '"'; i++ {
				if v[i] != '\\' {
					continue
				}
				if i++; v[i] != 'u' {
					continue
				}
				r := hex4(v[i+1:])
				i += 4
				if !utf16.IsSurrogate(r) {
					continue
				}
				if r < 0xdc00 && i+6 < len(v) && v[i+1] == '\\' && v[i+2] == 'u' {
					if low := hex4(v[i+3:]); low >= 0xdc00 && low <= 0xdfff {
						i += 6
						continue
					}
				}
				return "holds an escaped surrogate without its pair (\\u" + string(v[i-3:i+1]) + ")"
			}
		case c == '-' || c >= '0' && c <= '9':
			end := i + 1
			for end < len(v) && strings.IndexByte("+-.eE0123456789", v[end]) >= 0 {
				end++
			}
			if _, err := strconv.ParseFloat(string(v[i:end]), 64); err != nil {
				return "holds the number " + truncate(string(v[i:end]), 20) + ", beyond the range of a 64-bit float"
			}
			i = end - 1
		}
	}
	return ""
}

// hex4 is the rune of the 4 hex digits that start b.
func hex4(b []byte) rune {
	n, _ := strconv.ParseUint(string(b[:4]), 16, 32)
	return rune(n)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// jsonDepth returns how deep arrays and objects nest in v, valid JSON.
func jsonDepth(v []byte) int {
	depth, deepest := 0, 0
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '"':
			for i++; v[i] != '"'; i++ {
				if v[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			if depth++; depth > deepest {
				deepest = depth
			}
		case '}', ']':
			depth--
		}
	}
	return deepest
}

// ValidateUser reports whether u can be a user ID: 1 to 256 bytes of UTF-8
// without NUL, which PostgreSQL cannot store in text.
func ValidateUser(u string) error { return validateUser(u, true) }

// validateUser is ValidateUser; with strict false it lets through the NUL
// bytes that SQLite databases stored before they were refused may hold in
// overrides: such a database still loads, and clearing the override, or a
// change that leaves it out, cleans it up.
func validateUser(u string, strict bool) error {
	if len(u) < minUserBytes || len(u) > MaxUserBytes || !utf8.ValidString(u) {
		return Errorf(EInvalid, "user ID must be 1 to %d bytes of valid UTF-8", MaxUserBytes)
	}
	if strict && strings.IndexByte(u, 0) >= 0 {
		return Errorf(EInvalid, "user ID must not hold a NUL byte (\\u0000)")
	}
	return nil
}

// Ring returns the ring of f's buckets, whether or not f is enabled.
func (f Feature) Ring() *ring.Ring {
	r, err := ring.New(RingBuckets(f.Buckets)...)
	if err != nil {
		// Validate refuses every bucket list ring.New refuses.
		panic("rollout: ring of a validated feature: " + err.Error())
	}
	return r
}

// ServedRing returns the ring of what f serves: its buckets when enabled;
// when disabled, its fallback on every position, or nothing.
func (f Feature) ServedRing() *ring.Ring {
	switch {
	case f.Enabled:
		return f.Ring()
	case f.Fallback != "":
		r, _ := ring.New(ring.Bucket{Name: f.Fallback, Replicas: 1})
		return r
	}
	return &ring.Ring{}
}

// RingBuckets returns bs as the ring's buckets: their names and replicas.
func RingBuckets(bs []Bucket) []ring.Bucket {
	out := make([]ring.Bucket, len(bs))
	for i, b := range bs {
		out[i] = ring.Bucket{Name: b.Name, Replicas: b.Replicas}
	}
	return out
}

// CompactJSON returns v compacted: the form in which bucket and condition
// values are stored and compared (see SameConditions), so that equal
// values are equal bytes. v is returned as it is when it is not JSON.
func CompactJSON(v json.RawMessage) json.RawMessage {
	if len(v) == 0 {
		return nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, v); err != nil {
		return v
	}
	return buf.Bytes()
}

// Tag names a feature's configuration at one version, for If-Match: its
// version and the start of its ID, so that a feature deleted and made again
// under the same key never matches a tag of the one before.
func (f Feature) Tag() string {
	id := strings.ReplaceAll(f.ID, "-", "")
	return strconv.Itoa(f.Version) + "-" + id[:min(len(id), 12)]
}

// ValidKey reports whether s can be the key of a feature or a segment: 1
// to 64 characters of a-z, 0-9, '_', '.', '-', starting with a letter or
// digit.
func ValidKey(s string) bool { return keyPattern.MatchString(s) }

// ValidBucketName reports whether s can name a bucket: 1 to 64 characters
// of A-Z, a-z, 0-9, '_', '.', '-'.
func ValidBucketName(s string) bool { return bucketPattern.MatchString(s) }

// Abbreviate shortens s, a name or value a user gave, to the length that
// messages and change summaries quote (60 bytes and "…").
func Abbreviate(s string) string {
	if len(s) <= summaryValueLimit {
		return s
	}
	return strings.ToValidUTF8(s[:summaryValueLimit], "") + "…"
}
