package feature

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"maps"
	"slices"
	"strconv"

	"github.com/rollout/rollout/ring"
)

// Syncing a copy of the features into another process. The sync API serves
// a sync document (AppendSync): every feature's sync form, which holds what
// evaluation needs and nothing else — no descriptions, and overrides keyed
// by a salted hash of their user, never the user ID. A client decodes it
// with DecodeSync into a Snapshot, so that it evaluates with the same code
// as the server, applies the changes the stream sends with ApplySync, and
// counts its evaluations in the snapshot for TakeExposures to collect.

// SyncFormat is the format of the sync documents AppendSync writes. A
// document without a format is the first one, which carried features
// whole; DecodeSync reads both.
const SyncFormat = 2

// SyncFeature is a feature's sync form: its configuration but for its
// description, timestamps and the user IDs of its overrides.
type SyncFeature struct {
	ID       string   `json:"id"`
	Key      string   `json:"key"`
	Enabled  bool     `json:"enabled"`
	Salt     string   `json:"salt"`
	Fallback string   `json:"fallback,omitempty"`
	Buckets  []Bucket `json:"buckets"`
	// Overrides are the overridden users by bucket name: each user's
	// OverrideHash, sorted.
	Overrides map[string][]string `json:"overrides,omitempty"`
	// Rules and BucketBy are the feature's targeting, as the feature has
	// them; Segments are the segments its rules use (in_segment), sorted
	// by key, so that a client evaluates exactly as the server does.
	// Absent for a feature without targeting (a client that does not
	// know them ignores them, and serves such a feature by its ring).
	Rules    []Rule        `json:"rules,omitempty"`
	BucketBy string        `json:"bucket_by,omitempty"`
	Segments []SyncSegment `json:"segments,omitempty"`
	// Prerequisites are the feature's, as it has them (absent for none):
	// a client evaluates them in its own snapshot, as the server does.
	Prerequisites []Prerequisite `json:"prerequisites,omitempty"`
	Version       int            `json:"version"`
}

// SyncSegment is a segment as a feature's sync form carries it: what
// evaluation needs. A user list (List) carries its users hashed (Users,
// ListUserHash each, sorted), never their IDs, and one condition of
// operator SyncListMarker, which clients that do not know user lists
// refuse: they leave the feature out rather than take the list for a
// segment without conditions, which everyone matches.
type SyncSegment struct {
	Key        string      `json:"key"`
	Version    int         `json:"version"`
	Conditions []Condition `json:"conditions"`
	List       bool        `json:"list,omitempty"`
	Users      []string    `json:"users,omitempty"`
}

// SyncListMarker is the operator of the one condition a user list's sync
// form holds (see SyncSegment).
const SyncListMarker = "user_list"

// SyncDocument is a sync document as AppendSync writes it: the store
// revision the snapshot had caught up with and the sync form of every
// feature (a SyncFeature each, sorted by key).
type SyncDocument struct {
	Format   int               `json:"format"`
	Revision int64             `json:"revision"`
	Features []json.RawMessage `json:"features"`
}

// syncSumSize is the size of the digests that make a SyncTag.
const syncSumSize = 16

// syncForm returns c's sync form encoded, and its digest. It is encoded
// once, on first use, and shared by every snapshot and stream event that
// holds c.
func (c *Compiled) syncForm() ([]byte, [syncSumSize]byte) {
	c.sync.Do(func() {
		if c.syncJSON != nil { // received encoded (see compileSync)
			return
		}
		c.syncJSON = c.appendSyncForm()
		c.syncSum = syncSum(c.syncJSON)
	})
	return c.syncJSON, c.syncSum
}

func syncSum(data []byte) [syncSumSize]byte {
	sum := sha256.Sum256(data)
	return [syncSumSize]byte(sum[:syncSumSize])
}

// appendSyncForm encodes c as a SyncFeature, compact, into a buffer sized
// for it up front: a feature of 10,000 overrides and 100 buckets of 8 KB
// values encodes into one allocation of its size, rather than the several
// times its size that encoding/json's growing buffers and copies take.
// Values are written as they are (compacted), not HTML-escaped, so that a
// client serves the server's bytes.
func (c *Compiled) appendSyncForm() []byte {
	f := &c.feature
	byBucket := make([][]ring.Position, len(c.names))
	for h, b := range c.overrides {
		byBucket[b] = append(byBucket[b], h)
	}
	size := 128 + len(f.ID) + len(f.Key) + 2*len(f.Salt) + len(f.Fallback) + 35*len(c.overrides)
	for _, b := range f.Buckets {
		size += 48 + 2*len(b.Name) + len(b.Value)
	}
	var buf bytes.Buffer
	buf.Grow(size)
	str := func(s string) {
		data, _ := json.Marshal(s) // a string: cannot fail
		buf.Write(data)
	}
	buf.WriteString(`{"id":`)
	str(f.ID)
	buf.WriteString(`,"key":`)
	str(f.Key)
	buf.WriteString(`,"enabled":` + strconv.FormatBool(f.Enabled) + `,"salt":`)
	str(f.Salt)
	if f.Fallback != "" {
		buf.WriteString(`,"fallback":`)
		str(f.Fallback)
	}
	buf.WriteString(`,"buckets":[`)
	for i, b := range f.Buckets {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString(`{"name":`)
		str(b.Name)
		buf.WriteString(`,"replicas":` + strconv.Itoa(b.Replicas))
		if len(b.Value) > 0 {
			buf.WriteString(`,"value":`)
			if err := json.Compact(&buf, b.Value); err != nil {
				buf.Write(b.Value) // Validate refuses what Compact does
			}
		}
		buf.WriteByte('}')
	}
	buf.WriteByte(']')
	if len(c.overrides) > 0 {
		buf.WriteString(`,"overrides":{`)
		first := true
		for b, hs := range byBucket { // by name: c.names is sorted
			if len(hs) == 0 {
				continue
			}
			if !first {
				buf.WriteByte(',')
			}
			first = false
			str(c.names[b])
			buf.WriteString(":[")
			slices.SortFunc(hs, ring.Position.Compare)
			for i, h := range hs {
				if i > 0 {
					buf.WriteByte(',')
				}
				var raw [2 * 8]byte
				binary.BigEndian.PutUint64(raw[:8], h.Hi)
				binary.BigEndian.PutUint64(raw[8:], h.Lo)
				buf.WriteByte('"')
				buf.Write(hex.AppendEncode(buf.AvailableBuffer(), raw[:]))
				buf.WriteByte('"')
			}
			buf.WriteByte(']')
		}
		buf.WriteByte('}')
	}
	c.appendSyncTargeting(&buf)
	if len(f.Prerequisites) > 0 {
		data, _ := json.Marshal(f.Prerequisites) // validated: cannot fail
		buf.WriteString(`,"prerequisites":`)
		buf.Write(data)
	}
	buf.WriteString(`,"version":` + strconv.Itoa(f.Version) + "}")
	return buf.Bytes()
}

// appendSyncTargeting appends the rules, bucket_by and segments members of
// c's sync form, when it has them.
func (c *Compiled) appendSyncTargeting(buf *bytes.Buffer) {
	f := &c.feature
	if len(f.Rules) > 0 {
		data, _ := json.Marshal(f.Rules) // validated: cannot fail
		buf.WriteString(`,"rules":`)
		buf.Write(data)
	}
	if f.BucketBy != "" {
		data, _ := json.Marshal(f.BucketBy)
		buf.WriteString(`,"bucket_by":`)
		buf.Write(data)
	}
	if c.targeting == nil {
		return
	}
	segs := map[string]*CompiledSegment{}
	var add func(conds []compiledCond)
	add = func(conds []compiledCond) {
		for _, cc := range conds {
			if cc.seg != nil {
				segs[cc.segKey] = cc.seg
			}
			add(cc.anyOf)
		}
	}
	for _, r := range c.targeting.rules {
		add(r.conds)
	}
	if len(segs) == 0 {
		return
	}
	buf.WriteString(`,"segments":[`)
	for i, key := range slices.Sorted(maps.Keys(segs)) {
		if i > 0 {
			buf.WriteByte(',')
		}
		cs := segs[key]
		seg := cs.segment
		if cs.users == nil {
			data, _ := json.Marshal(SyncSegment{Key: key, Version: seg.Version, Conditions: seg.Clone().Conditions})
			buf.Write(data)
			continue
		}
		// A user list: its hashes written straight into buf.
		data, _ := json.Marshal(SyncSegment{Key: key, Version: seg.Version, Conditions: []Condition{{Op: SyncListMarker}}, List: true})
		buf.Write(data[:len(data)-1])
		buf.WriteString(`,"users":`)
		buf.Grow(35*cs.users.Len() + 2)
		buf.Write(cs.users.appendHashes(buf.AvailableBuffer()))
		buf.WriteByte('}')
	}
	buf.WriteByte(']')
}

func positionHex(p ring.Position) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], p.Hi)
	binary.BigEndian.PutUint64(b[8:], p.Lo)
	return hex.EncodeToString(b[:])
}

// SyncFeature returns the sync form of the feature key, encoded, as
// AppendSync writes it. The slice is shared: do not modify it.
func (s *Snapshot) SyncFeature(key string) (json.RawMessage, bool) {
	c, ok := s.features[key]
	if !ok {
		return nil, false
	}
	data, _ := c.syncForm()
	return data, true
}

// AppendSync appends s's sync document to dst, a SyncDocument of format
// SyncFormat followed by a newline: the concatenation of SyncParts. Its
// bytes are a function of the revision and the features' sync forms, which
// SyncTag names.
func (s *Snapshot) AppendSync(dst []byte) []byte {
	parts := s.SyncParts()
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	dst = slices.Grow(dst, n)
	for _, p := range parts {
		dst = append(dst, p...)
	}
	return dst
}

var (
	syncComma = []byte(",")
	syncEnd   = []byte("]}\n")
)

// SyncParts returns s's sync document in parts to be written one after the
// other: a head, the features' sync forms between commas, and a tail.
// Written that way, the document costs no copy of its own: the sync forms
// are the ones each feature keeps. The parts are shared: do not modify
// them.
func (s *Snapshot) SyncParts() [][]byte {
	parts := make([][]byte, 0, 2*len(s.keys)+1)
	parts = append(parts, fmt.Appendf(nil, `{"format":%d,"revision":%d,"features":[`, SyncFormat, s.revision))
	for i, key := range s.keys {
		if i > 0 {
			parts = append(parts, syncComma)
		}
		data, _ := s.features[key].syncForm()
		parts = append(parts, data)
	}
	return append(parts, syncEnd)
}

// SyncTag returns a strong entity tag of s's sync document (a quoted
// digest): two snapshots have the same tag exactly when AppendSync writes
// the same bytes for them. A client that applied the stream's changes
// computes the tag of the document the server would serve it.
func (s *Snapshot) SyncTag() string {
	h := sha256.New()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(s.revision))
	h.Write([]byte("rollout sync 2\n"))
	h.Write(b[:])
	for _, key := range s.keys {
		_, sum := s.features[key].syncForm()
		h.Write(sum[:])
	}
	return `"` + hex.EncodeToString(h.Sum(nil)[:syncSumSize]) + `"`
}

// DecodeSync builds a snapshot from a sync document: of format SyncFormat,
// or of the first format (features whole, see NewSnapshot), which caches
// written by older clients hold. A feature that does not validate, or
// whose key came before, is left out and named in the returned error, as
// NewSnapshot does; a document that cannot be read is an EInvalid error
// and a nil snapshot.
func DecodeSync(data []byte) (*Snapshot, error) {
	var doc struct {
		Format   int             `json:"format"`
		Revision int64           `json:"revision"`
		Features json.RawMessage `json:"features"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, Errorf(EInvalid, "decode the sync document: %v", err)
	}
	switch doc.Format {
	case 0:
		var features []Feature
		if err := json.Unmarshal(doc.Features, &features); err != nil {
			return nil, Errorf(EInvalid, "decode the sync document's features: %v", err)
		}
		return NewSnapshot(features, doc.Revision)
	case SyncFormat:
		var features []json.RawMessage
		if err := json.Unmarshal(doc.Features, &features); err != nil {
			return nil, Errorf(EInvalid, "decode the sync document's features: %v", err)
		}
		return (&Snapshot{}).ApplySync(doc.Revision, features, nil)
	}
	return nil, Errorf(EInvalid, "the sync document has format %d; this code reads formats 1 and %d", doc.Format, SyncFormat)
}

// ApplySync returns a copy of s at revision in which each feature of set (a
// SyncFeature each, encoded) replaces the feature of its key, and the keys
// of deleted are gone: a change the stream sent. A feature that does not
// validate, or repeats a key of set, is left out and named in the returned
// error, and s's feature of that key is kept. s is not changed.
func (s *Snapshot) ApplySync(revision int64, set []json.RawMessage, deleted []string) (*Snapshot, error) {
	features := make(map[string]*Compiled, len(s.features)+len(set))
	maps.Copy(features, s.features)
	for _, key := range deleted {
		delete(features, key)
	}
	var errs []error
	seen := make(map[string]bool, len(set))
	for i, data := range set {
		c, err := compileSync(data)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("feature %d left out: %w", i, err))
		case seen[c.feature.Key]:
			errs = append(errs, fmt.Errorf("feature %q left out: the key appears twice", c.feature.Key))
		default:
			seen[c.feature.Key] = true
			features[c.feature.Key] = c
		}
	}
	return newSnapshot(features, revision), errors.Join(errs...)
}

// compileSync compiles an encoded SyncFeature, keeping its bytes as its
// sync form.
func compileSync(data json.RawMessage) (*Compiled, error) {
	var sf SyncFeature
	if err := json.Unmarshal(data, &sf); err != nil {
		return nil, Errorf(EInvalid, "decode: %v", err)
	}
	f := Feature{ID: sf.ID, Key: sf.Key, Enabled: sf.Enabled, Salt: sf.Salt, Fallback: sf.Fallback, Buckets: sf.Buckets, Version: sf.Version,
		Rules: sf.Rules, BucketBy: sf.BucketBy, Prerequisites: sf.Prerequisites}
	// Patterns over their limits, which a server may hold from before
	// them, compile as it compiles them: conditions that never hold.
	if err := f.validate(true, true); err != nil {
		return nil, fmt.Errorf("feature %q: %w", f.Key, err)
	}
	segments, err := syncSegments(f, sf.Segments)
	if err != nil {
		return nil, err
	}
	c := compileRing(f)
	n := 0
	for _, hs := range sf.Overrides {
		n += len(hs)
	}
	if n > MaxOverrides {
		return nil, Errorf(EInvalid, "feature %q: a feature has at most %d overrides", f.Key, MaxOverrides)
	}
	if n > 0 {
		c.overrides = make(map[ring.Position]int, n)
	}
	for bucket, hs := range sf.Overrides {
		b, ok := c.index[bucket]
		if !ok {
			return nil, Errorf(EInvalid, "feature %q: overrides name bucket %q, which the feature does not have", f.Key, bucket)
		}
		for _, h := range hs {
			var raw [16]byte
			if len(h) != 2*len(raw) {
				return nil, Errorf(EInvalid, "feature %q: override hash %q is not 32 hex digits", f.Key, h)
			}
			if _, err := hex.Decode(raw[:], []byte(h)); err != nil {
				return nil, Errorf(EInvalid, "feature %q: override hash %q is not 32 hex digits", f.Key, h)
			}
			p := ring.Position{Hi: binary.BigEndian.Uint64(raw[:8]), Lo: binary.BigEndian.Uint64(raw[8:])}
			if _, dup := c.overrides[p]; dup {
				return nil, Errorf(EInvalid, "feature %q: override hash %s appears twice", f.Key, h)
			}
			c.overrides[p] = b
		}
	}
	c.finish(segments)
	c.syncJSON = slices.Clone(data)
	c.syncSum = syncSum(c.syncJSON)
	return c, nil
}

// syncSegments compiles the segments of a feature's sync form, which must
// hold every segment the feature's rules use, each once and valid.
func syncSegments(f Feature, list []SyncSegment) (map[string]*CompiledSegment, error) {
	if len(list) > MaxSegments {
		return nil, Errorf(EInvalid, "feature %q: %d segments; at most %d", f.Key, len(list), MaxSegments)
	}
	out := make(map[string]*CompiledSegment, len(list))
	for _, ss := range list {
		seg := Segment{Key: ss.Key, Version: ss.Version, Conditions: ss.Conditions}
		if ss.List {
			if len(ss.Conditions) != 1 || ss.Conditions[0].Op != SyncListMarker {
				return nil, Errorf(EInvalid, "feature %q: user list %q: its sync form holds one condition, of operator %s", f.Key, ss.Key, SyncListMarker)
			}
			seg.Conditions, seg.List, seg.Size = nil, true, len(ss.Users)
		} else if len(ss.Users) > 0 {
			return nil, Errorf(EInvalid, "feature %q: segment %q has users but is not a user list", f.Key, ss.Key)
		}
		if err := seg.validate(true); err != nil {
			return nil, fmt.Errorf("feature %q: %w", f.Key, err)
		}
		if _, dup := out[ss.Key]; dup {
			return nil, Errorf(EInvalid, "feature %q: segment %q appears twice", f.Key, ss.Key)
		}
		if !ss.List {
			out[ss.Key] = CompileSegment(seg)
			continue
		}
		users, err := userListOfHashes(ss.Key, ss.Users)
		if err != nil {
			return nil, fmt.Errorf("feature %q: %w", f.Key, err)
		}
		out[ss.Key] = CompileUserList(seg, users)
	}
	for _, key := range f.Segments() {
		if _, ok := out[key]; !ok {
			return nil, Errorf(EInvalid, "feature %q: its rules use segment %q, which its sync form lacks", f.Key, key)
		}
	}
	return out, nil
}

// NewSnapshot builds a snapshot of features at a store revision. A feature
// that does not validate, or whose key came before, is left out and named
// in the returned error; the snapshot holds all the others, so one bad
// feature never stops the rest from being served. The snapshot is never
// nil.
func NewSnapshot(features []Feature, revision int64) (*Snapshot, error) {
	all := make(map[string]*Compiled, len(features))
	var errs []error
	for _, f := range features {
		if err := f.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("feature %q left out: %w", f.Key, err))
			continue
		}
		if _, dup := all[f.Key]; dup {
			errs = append(errs, fmt.Errorf("feature %q left out: the key appears twice", f.Key))
			continue
		}
		all[f.Key] = compile(f.Clone())
	}
	return newSnapshot(all, revision), errors.Join(errs...)
}

// Changed returns the keys of the features that next serves differently
// from s, sorted: those created, deleted, or at another version or ID.
func (s *Snapshot) Changed(next *Snapshot) []string {
	var out []string
	for key, c := range s.features {
		n, ok := next.features[key]
		if !ok || n.feature.ID != c.feature.ID || n.feature.Version != c.feature.Version {
			out = append(out, key)
		}
	}
	for key := range next.features {
		if _, ok := s.features[key]; !ok {
			out = append(out, key)
		}
	}
	slices.Sort(out)
	return out
}

// TakeExposures appends to out the evaluations Evaluate counted in s since
// the last take, per feature, version and bucket, and resets those counts.
// Counts made concurrently are taken by this call or the next, never lost
// or taken twice.
func (s *Snapshot) TakeExposures(out []Exposure) []Exposure {
	var taken []pending
	for _, key := range s.keys {
		taken = s.features[key].take(taken[:0])
		for _, p := range taken {
			out = append(out, p.exposure())
		}
	}
	return out
}
