package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rollout/rollout/api/client"
	"github.com/rollout/rollout/api/clienttest/internal/testserver"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store/sqlite"
)

// TestPatternsStoredBeforeTheirLimits: a database may hold patterns
// written before their limits existed (here written into the store
// directly): the server still starts and serves such a feature, the client
// compiles its snapshot as the server does, and the pattern's condition
// never holds on either; the next change to the feature must replace it.
func TestPatternsStoredBeforeTheirLimits(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rollout.db")
	huge := strings.Repeat(`(?:\w?){1000}`, 19) + "$" // 38,002 instructions
	matches := func(p string) feature.Condition {
		v, _ := json.Marshal(p)
		return feature.Condition{Attribute: "email", Op: feature.OpMatches, Value: v}
	}
	plan := feature.Condition{Attribute: "plan", Op: feature.OpEq, Value: json.RawMessage(`"pro"`)}
	now := time.Now().UTC()
	seg := feature.Segment{Key: "bots", Conditions: []feature.Condition{matches(huge)}, Version: 1, CreatedAt: now, UpdatedAt: now}
	f := feature.Feature{ID: "f-legacy", Key: "legacy", Enabled: true, Salt: "legacy", Version: 1, CreatedAt: now, UpdatedAt: now,
		Buckets: []feature.Bucket{{Name: "off", Replicas: 100}, {Name: "on", Replicas: 100}},
		Rules: []feature.Rule{
			{Name: "huge", Conditions: []feature.Condition{matches(huge)}, Serve: feature.Serve{Bucket: "on"}},
			{Name: "bots", Conditions: []feature.Condition{{Op: feature.OpInSegment, Value: json.RawMessage(`"bots"`)}}, Serve: feature.Serve{Bucket: "on"}},
			{Name: "pro", Conditions: []feature.Condition{plan}, Serve: feature.Serve{Bucket: "on"}},
		}}
	if err := f.Validate(); err == nil {
		t.Fatal("the legacy feature validates: the test no longer holds a pattern over the limits")
	}
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.CreateSegment(ctx, seg, feature.SegmentVersion{Version: 1, Actor: "old", Time: now, Summary: "created", Config: seg}, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateFeature(ctx, f, rollout.Version{Version: 1, Actor: "old", Time: now, Summary: "created", Config: f}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s := testserver.StartAt(t, path, "127.0.0.1:0")
	c := newClient(t, client.Config{URL: s.URL})
	long := strings.Repeat("a", 1000) // what the pattern matches
	for _, tc := range []struct {
		ctx  feature.Context
		rule string
	}{
		{feature.Context{"email": long}, ""},
		{feature.Context{"email": long, "plan": "pro"}, "pro"},
	} {
		want, err := s.Svc.Snapshot().PeekContext("legacy", "u1", tc.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want.Rule != tc.rule {
			t.Errorf("server: rule %q for %v, want %q", want.Rule, tc.ctx["plan"], tc.rule)
		}
		got, err := c.EvaluateContext("legacy", "u1", tc.ctx)
		if err != nil {
			t.Fatalf("client: %v", err)
		}
		if got.Rule != want.Rule || got.Bucket != want.Bucket {
			t.Errorf("client: rule %q bucket %q, server rule %q bucket %q", got.Rule, got.Bucket, want.Rule, want.Bucket)
		}
	}

	// A change must replace the pattern: refused, naming the condition.
	req, _ := http.NewRequest("PATCH", s.URL+"/api/features/legacy", strings.NewReader(`{"description":"x"}`))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if want := `rules[0].conditions[0].value: rule \"huge\"`; res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(body), want) {
		t.Errorf("PATCH of the legacy feature = %d %s, want 422 (a feature's invalid configuration) naming %s", res.StatusCode, body, want)
	}
}

// TestContextTooLargeInApp: the in-app client refuses a context over
// feature.MaxContextBytes as the server does, with the same message.
func TestContextTooLargeInApp(t *testing.T) {
	s := testserver.Start(t)
	s.Create(t, feature.Feature{Key: "plain", Enabled: true, Salt: "plain", Buckets: []feature.Bucket{{Name: "off", Replicas: 100}, {Name: "on", Replicas: 100}}})
	c := newClient(t, client.Config{URL: s.URL})
	large := feature.Context{}
	for i := range feature.MaxContextBytes/feature.MaxContextValueLen + 1 {
		large[fmt.Sprint("a", i)] = strings.Repeat("x", feature.MaxContextValueLen)
	}
	_, err := c.EvaluateContext("plain", "u1", large)
	if err == nil || feature.ErrorCode(err) != feature.EInvalid {
		t.Fatalf("EvaluateContext of %d bytes = %v, want EInvalid", feature.MaxContextBytes+feature.MaxContextValueLen, err)
	}
	body, _ := json.Marshal(map[string]any{"user": "u1", "features": []string{"plain"}, "context": large})
	res, err := http.Post(s.URL+"/evaluate", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(res.Body)
	res.Body.Close()
	msg, _ := json.Marshal(feature.ErrorMessage(err2(c.EvaluateContext("plain", "u1", large))))
	if res.StatusCode != http.StatusUnprocessableEntity || !bytes.Contains(answer, msg) {
		t.Errorf("POST /evaluate of the same context = %d %s, want 422 saying %s", res.StatusCode, answer, msg)
	}
}

func err2[T any](_ T, err error) error { return err }

// TestConditionsStoredBeforeTheirLimit: a database may hold rules whose
// conditions, segments expanded, pass feature.MaxConditionChecks (80
// rules of 19 in_segment of a segment of 20 conditions: 30,480, written
// into the store directly): the server still starts and serves the
// feature, the client compiles its snapshot as the server does, the
// conditions past the limit never hold on either, and the next change to
// the feature is refused until it comes within the limit.
func TestConditionsStoredBeforeTheirLimit(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rollout.db")
	now := time.Now().UTC()
	eq := func(attr, v string) feature.Condition {
		return feature.Condition{Attribute: attr, Op: feature.OpEq, Value: json.RawMessage(`"` + v + `"`)}
	}
	seg := feature.Segment{Key: "pros", Version: 1, CreatedAt: now, UpdatedAt: now}
	for range feature.MaxConditions {
		seg.Conditions = append(seg.Conditions, eq("plan", "pro"))
	}
	in := feature.Condition{Op: feature.OpInSegment, Value: json.RawMessage(`"pros"`)}
	f := feature.Feature{ID: "f-wide", Key: "wide", Enabled: true, Salt: "wide", Version: 1, CreatedAt: now, UpdatedAt: now,
		Buckets: []feature.Bucket{{Name: "off", Replicas: 100}, {Name: "on", Replicas: 100}}}
	for i := range 80 { // within feature.MaxTargetingBytes
		r := feature.Rule{Name: fmt.Sprintf("r%d", i), Serve: feature.Serve{Bucket: "on"}}
		r.Conditions = append(r.Conditions, eq("org", fmt.Sprint(i)))
		for range feature.MaxConditions - 1 {
			r.Conditions = append(r.Conditions, in)
		}
		f.Rules = append(f.Rules, r)
	}
	if err := f.Validate(); err == nil {
		t.Fatal("the stored feature validates: the test no longer holds rules over the limit")
	}
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.CreateSegment(ctx, seg, feature.SegmentVersion{Version: 1, Actor: "old", Time: now, Summary: "created", Config: seg}, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateFeature(ctx, f, rollout.Version{Version: 1, Actor: "old", Time: now, Summary: "created", Config: f}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s := testserver.StartAt(t, path, "127.0.0.1:0")
	c := newClient(t, client.Config{URL: s.URL})
	// Each rule costs 1 + 19 × 20 = 381 checks: the first two are within
	// the limit, the third passes it.
	for _, tc := range []struct {
		org, rule string
	}{{"0", "r0"}, {"1", "r1"}, {"2", ""}, {"79", ""}} {
		attrs := feature.Context{"org": tc.org, "plan": "pro"}
		want, err := s.Svc.Snapshot().PeekContext("wide", "u1", attrs)
		if err != nil {
			t.Fatal(err)
		}
		if want.Rule != tc.rule {
			t.Errorf("server: org %s: rule %q, want %q", tc.org, want.Rule, tc.rule)
		}
		got, err := c.EvaluateContext("wide", "u1", attrs)
		if err != nil {
			t.Fatalf("client: %v", err)
		}
		if got.Rule != want.Rule || got.Bucket != want.Bucket {
			t.Errorf("client: org %s: rule %q bucket %q, server rule %q bucket %q", tc.org, got.Rule, got.Bucket, want.Rule, want.Bucket)
		}
	}
	req, _ := http.NewRequest("PATCH", s.URL+"/api/features/wide", strings.NewReader(`{"description":"x"}`))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if want := `rules[50].conditions[0]: rule \"r50\": the feature's conditions come to 1001 checks`; res.StatusCode/100 != 4 || !strings.Contains(string(body), want) {
		t.Errorf("PATCH of the stored feature = %d %s, want a 4xx naming %s", res.StatusCode, body, want)
	}
}
