// Package provider is an OpenFeature provider (github.com/open-feature/go-sdk)
// over rollout's in-process client (package client): every evaluation is
// answered from the client's synced snapshot, with no network call.
//
// The bucket's JSON value is the flag's value: a boolean, string, integer,
// float or object evaluation of a value of another JSON type answers the
// default with TYPE_MISMATCH (an integer may be written 10, 10.0 or 1e1).
// The targeting key is the user ID, and every other attribute of the
// evaluation context is passed to the feature's rules and bucket_by (see
// client.Client.EvaluateContext), as OFREP's server reads them. The variant is the
// bucket's name and the reason the one OFREP's server gives
// (feature.Evaluation.OpenFeatureReason: STATIC, TARGETING_MATCH, SPLIT,
// DEFAULT or DISABLED); a rule that served is named by the flag metadata's
// "rule", and a prerequisite that failed (reason DEFAULT, the feature's
// fallback) by its "prerequisite". When the kill switch is off the value is the fallback bucket's,
// or the code's default when the feature has no fallback.
//
// The flag metadata holds the feature's "version". Without a targeting key
// a feature answers when no user ID can change its answer (switched off;
// or no overrides and a ring of one bucket or bucketed by an attribute);
// any other answers TARGETING_KEY_MISSING.
//
// Events: PROVIDER_CONFIGURATION_CHANGED with the changed flag keys on every
// change, PROVIDER_STALE while the client can reach the server neither by
// its stream nor by polling, PROVIDER_READY when it can again.
package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-feature/go-sdk/openfeature"

	"github.com/rollout/rollout/api/client"
	"github.com/rollout/rollout/rollout/feature"
)

// Name is the provider's name in its metadata.
const Name = "rollout"

// eventBuffer is how many events may wait for the SDK before the newest
// are dropped (the client's sync loop never waits for the SDK).
const eventBuffer = 256

// Provider is an OpenFeature provider over a rollout client. It is safe
// for concurrent use.
type Provider struct {
	c      *client.Client
	events chan openfeature.Event
	stop   func()
	shapes shapes
}

var (
	_ openfeature.FeatureProvider = (*Provider)(nil)
	_ openfeature.StateHandler    = (*Provider)(nil)
	_ openfeature.EventHandler    = (*Provider)(nil)
	_ openfeature.Tracker         = (*Provider)(nil)
)

// Track reports the event trackingEventName (the key of a metric on the
// server) for the context's targeting key, with the details' value, by
// the client's Track. An event without a targeting key, or that Track
// refuses, is dropped: OpenFeature's Track returns nothing.
func (p *Provider) Track(_ context.Context, trackingEventName string, evalCtx openfeature.EvaluationContext, details openfeature.TrackingEventDetails) {
	_ = p.c.Track(trackingEventName, evalCtx.TargetingKey(), details.Value())
}

// New returns a provider over c. The app keeps c, and closes it after
// shutting the provider down.
func New(c *client.Client) *Provider {
	return &Provider{c: c, events: make(chan openfeature.Event, eventBuffer)}
}

// Metadata names the provider.
func (p *Provider) Metadata() openfeature.Metadata { return openfeature.Metadata{Name: Name} }

// Hooks returns no hooks.
func (p *Provider) Hooks() []openfeature.Hook { return nil }

// Init starts passing the client's events on. The client has its snapshot
// already; a client started from its cache file with the server away is
// reported stale at once.
func (p *Provider) Init(openfeature.EvaluationContext) error {
	if p.stop != nil {
		p.stop()
	}
	p.stop = p.c.Watch(p.forward)
	if p.c.Stale() {
		p.send(openfeature.ProviderStale, openfeature.ProviderEventDetails{Message: "the rollout server cannot be reached: answering from the cached snapshot"})
	}
	return nil
}

// Shutdown stops passing events on. It does not close the client.
func (p *Provider) Shutdown() {
	if p.stop != nil {
		p.stop()
		p.stop = nil
	}
}

// EventChannel returns the provider's events.
func (p *Provider) EventChannel() <-chan openfeature.Event { return p.events }

func (p *Provider) forward(ev client.Event) {
	meta := map[string]any{"revision": ev.Revision}
	switch ev.Kind {
	case client.EventChanged:
		p.send(openfeature.ProviderConfigChange, openfeature.ProviderEventDetails{
			Message: fmt.Sprintf("%d features changed", len(ev.Features)), FlagChanges: ev.Features, EventMetadata: meta})
	case client.EventStale:
		p.send(openfeature.ProviderStale, openfeature.ProviderEventDetails{
			Message: fmt.Sprintf("the rollout server cannot be reached: answering from the last snapshot (%v)", ev.Err), EventMetadata: meta})
	case client.EventReady:
		p.send(openfeature.ProviderReady, openfeature.ProviderEventDetails{Message: "the rollout server answers again", EventMetadata: meta})
	}
}

func (p *Provider) send(t openfeature.EventType, d openfeature.ProviderEventDetails) {
	select {
	case p.events <- openfeature.Event{ProviderName: Name, EventType: t, ProviderEventDetails: d}:
	default:
	}
}

// resolve evaluates flag for the context's targeting key and attributes.
// It returns the bucket's value, nil when the feature serves no bucket,
// and the details; a failure sets the details' error and reason. Without a
// targeting key only a feature that does not need one answers (see
// shape.keyFree).
func (p *Provider) resolve(flag string, flatCtx openfeature.FlattenedContext) (json.RawMessage, openfeature.ProviderResolutionDetail) {
	snap := p.c.Snapshot()
	sh, ok := p.shapes.of(snap, flag)
	if !ok {
		return nil, failed(openfeature.NewFlagNotFoundResolutionError(fmt.Sprintf("flag %s not found: rollout has no feature %q", flag, flag)))
	}
	attrs, err := contextOf(flatCtx)
	if err != nil {
		return nil, failed(openfeature.NewInvalidContextResolutionError(feature.ErrorMessage(err)))
	}
	user, _ := flatCtx[openfeature.TargetingKey].(string)
	var ev feature.Evaluation
	switch {
	case user != "":
		if err = feature.ValidateUser(user); err != nil {
			return nil, failed(openfeature.NewInvalidContextResolutionError("the targeting key must be 1 to 256 bytes of UTF-8"))
		}
		ev, err = snap.EvaluateContext(flag, user, attrs) // what p.c.EvaluateContext does, on snap
	case sh.keyFree:
		// No override matches the empty ID, and one bucket has all of
		// the ring: the user ID cannot change the answer.
		ev, err = snap.EvaluateContext(flag, "", attrs)
	default:
		return nil, failed(openfeature.NewTargetingKeyMissingResolutionError("the evaluation context needs a targeting key: the user ID (this feature serves users different buckets)"))
	}
	if err != nil {
		if feature.ErrorCode(err) == feature.ENotFound {
			return nil, failed(openfeature.NewFlagNotFoundResolutionError(fmt.Sprintf("flag %s not found: rollout has no feature %q", flag, flag)))
		}
		return nil, failed(openfeature.NewGeneralResolutionError(err.Error()))
	}
	d := openfeature.ProviderResolutionDetail{
		Reason: openfeature.Reason(ev.OpenFeatureReason()), Variant: ev.Bucket,
		FlagMetadata: openfeature.FlagMetadata{"version": ev.Version},
	}
	if ev.Rule != "" {
		d.FlagMetadata["rule"] = ev.Rule
	}
	if ev.Prerequisite != "" {
		d.FlagMetadata["prerequisite"] = ev.Prerequisite
	}
	if p.c.Stale() {
		d.FlagMetadata["stale"] = true
	}
	if ev.Bucket == "" {
		return nil, d // switched off without a fallback: the code's default
	}
	return ev.Value, d
}

// contextOf returns the attributes of an OpenFeature context as rollout
// reads them, as OFREP's server reads the same context: every attribute but
// the targeting key (the user ID); strings, Go numbers, bools and []string
// as they are, lists of strings as []string, times as RFC 3339 strings;
// nulls, objects and other lists left out (no condition can test them). A
// context of attributes only, of those types, is passed on as it is, at no
// cost. It refuses, as the server does, more than feature.MaxContextAttrs
// attributes, a string longer than feature.MaxContextValueLen or a list
// longer than feature.MaxContextList, or more than feature.MaxContextBytes
// of names, strings and list entries.
func contextOf(flat openfeature.FlattenedContext) (feature.Context, error) {
	ctx := feature.Context(flat)
	if _, ok := flat[openfeature.TargetingKey]; ok {
		ctx = convert(flat)
	} else {
		for _, v := range flat {
			if !readable(v) {
				ctx = convert(flat)
				break
			}
		}
	}
	return ctx, feature.ValidateContext(ctx)
}

func readable(v any) bool {
	switch v.(type) {
	case string, bool, float64, float32, int, int64, int32, int16, int8, uint, uint64, uint32, uint16, uint8, []string:
		return true
	}
	return false
}

func convert(flat openfeature.FlattenedContext) feature.Context {
	ctx := make(feature.Context, len(flat))
	for k, v := range flat {
		if k == openfeature.TargetingKey {
			continue
		}
		switch x := v.(type) {
		case time.Time:
			ctx[k] = x.UTC().Format(time.RFC3339Nano)
		case []any:
			if list, ok := feature.StringList(x); ok {
				ctx[k] = list
			}
		default:
			if readable(v) {
				ctx[k] = v
			}
		}
	}
	return ctx
}

func failed(e openfeature.ResolutionError) openfeature.ProviderResolutionDetail {
	return openfeature.ProviderResolutionDetail{ResolutionError: e, Reason: openfeature.ErrorReason}
}

func mismatch(flag string, value json.RawMessage, want string) openfeature.ProviderResolutionDetail {
	return failed(openfeature.NewTypeMismatchResolutionError(fmt.Sprintf("feature %q serves %s, not %s", flag, value, want)))
}

// BooleanEvaluation serves a bucket whose value is true or false.
func (p *Provider) BooleanEvaluation(_ context.Context, flag string, def bool, flatCtx openfeature.FlattenedContext) openfeature.BoolResolutionDetail {
	v, d := p.resolve(flag, flatCtx)
	switch {
	case v == nil:
		return openfeature.BoolResolutionDetail{Value: def, ProviderResolutionDetail: d}
	case bytes.Equal(v, []byte("true")):
		return openfeature.BoolResolutionDetail{Value: true, ProviderResolutionDetail: d}
	case bytes.Equal(v, []byte("false")):
		return openfeature.BoolResolutionDetail{Value: false, ProviderResolutionDetail: d}
	}
	return openfeature.BoolResolutionDetail{Value: def, ProviderResolutionDetail: mismatch(flag, v, "a boolean")}
}

// StringEvaluation serves a bucket whose value is a JSON string (a bucket
// without a value serves its name).
func (p *Provider) StringEvaluation(_ context.Context, flag string, def string, flatCtx openfeature.FlattenedContext) openfeature.StringResolutionDetail {
	v, d := p.resolve(flag, flatCtx)
	if v == nil {
		return openfeature.StringResolutionDetail{Value: def, ProviderResolutionDetail: d}
	}
	var s string
	if v[0] != '"' || json.Unmarshal(v, &s) != nil {
		return openfeature.StringResolutionDetail{Value: def, ProviderResolutionDetail: mismatch(flag, v, "a string")}
	}
	return openfeature.StringResolutionDetail{Value: s, ProviderResolutionDetail: d}
}

// FloatEvaluation serves a bucket whose value is a JSON number.
func (p *Provider) FloatEvaluation(_ context.Context, flag string, def float64, flatCtx openfeature.FlattenedContext) openfeature.FloatResolutionDetail {
	v, d := p.resolve(flag, flatCtx)
	if v == nil {
		return openfeature.FloatResolutionDetail{Value: def, ProviderResolutionDetail: d}
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || !isNumber(v) {
		return openfeature.FloatResolutionDetail{Value: def, ProviderResolutionDetail: mismatch(flag, v, "a number")}
	}
	return openfeature.FloatResolutionDetail{Value: f, ProviderResolutionDetail: d}
}

// IntEvaluation serves a bucket whose value is a JSON number of an integer
// value that fits in an int64, however it is written: 10, 10.0, 1e1 and
// 100e-1 are all 10, as the OFREP and JavaScript providers read them; 10.5
// is a TYPE_MISMATCH.
func (p *Provider) IntEvaluation(_ context.Context, flag string, def int64, flatCtx openfeature.FlattenedContext) openfeature.IntResolutionDetail {
	v, d := p.resolve(flag, flatCtx)
	if v == nil {
		return openfeature.IntResolutionDetail{Value: def, ProviderResolutionDetail: d}
	}
	n, ok := jsonInt(v)
	if !ok {
		return openfeature.IntResolutionDetail{Value: def, ProviderResolutionDetail: mismatch(flag, v, "an integer")}
	}
	return openfeature.IntResolutionDetail{Value: n, ProviderResolutionDetail: d}
}

// ObjectEvaluation serves a bucket whose value is a JSON object (as a
// map[string]any) or array (as a []any).
func (p *Provider) ObjectEvaluation(_ context.Context, flag string, def any, flatCtx openfeature.FlattenedContext) openfeature.InterfaceResolutionDetail {
	v, d := p.resolve(flag, flatCtx)
	if v == nil {
		return openfeature.InterfaceResolutionDetail{Value: def, ProviderResolutionDetail: d}
	}
	var out any
	if (v[0] != '{' && v[0] != '[') || json.Unmarshal(v, &out) != nil {
		return openfeature.InterfaceResolutionDetail{Value: def, ProviderResolutionDetail: mismatch(flag, v, "an object")}
	}
	return openfeature.InterfaceResolutionDetail{Value: out, ProviderResolutionDetail: d}
}

// isNumber reports whether v, which strconv parsed, is a JSON number and
// not one of the forms only Go reads ("Inf", "0x1p-2", "1_000").
func isNumber(v json.RawMessage) bool {
	return json.Valid(v) && (v[0] == '-' || v[0] >= '0' && v[0] <= '9')
}

// jsonInt returns the value of v, a JSON number, when it is an integer
// that fits in an int64, whatever its notation ("10", "10.0", "1e1",
// "-0.5e1"). It computes exactly, from the digits, without a float's
// rounding (9007199254740993.0 is 9007199254740993) and without the
// unbounded work of a big number's exponent (1e1000000000 is refused at
// once).
func jsonInt(v json.RawMessage) (int64, bool) {
	if n, err := strconv.ParseInt(string(v), 10, 64); err == nil && v[0] != '+' {
		return n, true // the common form, at once
	}
	if !isNumber(v) {
		return 0, false
	}
	s := string(v)
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant = s[:i]
		e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil {
			e = math.MaxInt32 // an exponent too long to read: far out of range
			if s[i+1] == '-' {
				e = math.MinInt32
			}
		}
		exp = max(min(e, math.MaxInt32), math.MinInt32)
	}
	digits := mant
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		digits = mant[:i] + mant[i+1:]
		exp -= len(mant) - i - 1
	}
	digits = strings.TrimLeft(digits, "0")
	for len(digits) > 0 && digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
		exp++
	}
	if digits == "" {
		return 0, true // zero, however written
	}
	if exp < 0 || len(digits)+exp > 19 {
		return 0, false // a fraction, or beyond an int64
	}
	text := digits + strings.Repeat("0", exp)
	if neg {
		text = "-" + text
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

// shape is what the provider needs to know of a feature besides what an
// evaluation says.
type shape struct {
	// keyFree: it answers without a targeting key: switched off; or no
	// overrides and a ring that does not hash the user ID, because one
	// bucket has all of it or the feature buckets by an attribute (rules
	// read the context's other attributes, and serve a bucket or that
	// ring).
	keyFree bool
}

// shapes keeps the shapes of the features of one snapshot, each read
// once, on first use, from its sync form; a new snapshot starts afresh.
type shapes struct {
	cur atomic.Pointer[shapesOf]
}

type shapesOf struct {
	snap *feature.Snapshot
	mu   sync.RWMutex
	m    map[string]shape
}

// of returns the shape of the feature key in snap; ok is false when snap
// has no such feature.
func (s *shapes) of(snap *feature.Snapshot, key string) (shape, bool) {
	cur := s.cur.Load()
	if cur == nil || cur.snap != snap {
		next := &shapesOf{snap: snap, m: map[string]shape{}}
		if !s.cur.CompareAndSwap(cur, next) {
			next = s.cur.Load()
		}
		cur = next
	}
	cur.mu.RLock()
	sh, ok := cur.m[key]
	cur.mu.RUnlock()
	if ok && cur.snap == snap {
		return sh, true
	}
	raw, ok := snap.SyncFeature(key)
	if !ok {
		return shape{}, false
	}
	var f struct {
		Enabled bool `json:"enabled"`
		Buckets []struct {
			Replicas int `json:"replicas"`
		} `json:"buckets"`
		Overrides     json.RawMessage `json:"overrides"`
		BucketBy      string          `json:"bucket_by"`
		Prerequisites json.RawMessage `json:"prerequisites"`
	}
	if json.Unmarshal(raw, &f) != nil {
		return shape{}, true // needs a key: the safe answer
	}
	serving := 0
	for _, b := range f.Buckets {
		if b.Replicas > 0 {
			serving++
		}
	}
	empty := func(raw json.RawMessage) bool {
		t := string(bytes.TrimSpace(raw))
		return t == "" || t == "null" || t == "{}" || t == "[]"
	}
	sh = shape{keyFree: !f.Enabled || empty(f.Overrides) && empty(f.Prerequisites) && (serving == 1 || f.BucketBy != "")}
	if cur.snap == snap {
		cur.mu.Lock()
		cur.m[key] = sh
		cur.mu.Unlock()
	}
	return sh, true
}
