package client_test

import (
	"context"
	"encoding/json"
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
	if err := db.CreateSegment(ctx, seg, feature.SegmentVersion{Version: 1, Actor: "old", Time: now, Summary: "created", Config: seg}); err != nil {
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
	if want := `rules[0].conditions[0]: rule \"huge\"`; res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(body), want) {
		t.Errorf("PATCH of the legacy feature = %d %s, want 422 (a feature's invalid configuration) naming %s", res.StatusCode, body, want)
	}
}
