package provider_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/open-feature/go-sdk/openfeature"

	"github.com/rollout/rollout/api/clienttest/internal/testserver"
	"github.com/rollout/rollout/rollout/feature"
)

// TestStaticWithoutTargetingKey: a feature whose answer cannot depend on
// the context (one bucket with all the ring, no overrides, no rules)
// answers STATIC, with or without a targeting key; a switched-off one
// answers DISABLED without a key; any other needs the key.
func TestStaticWithoutTargetingKey(t *testing.T) {
	s := testserver.Start(t)
	one := testFeature("one", true, "", `"only"`, `"never"`)
	one.Buckets[1].Replicas = 0
	s.Create(t, one)
	overridden := testFeature("overridden", true, "", `"ring"`, `"vip"`)
	overridden.Buckets[1].Replicas = 0
	overridden.Overrides = map[string]string{"vip-user": "B"}
	s.Create(t, overridden)
	s.Create(t, testFeature("split", true, "", `"a"`, `"b"`))
	s.Create(t, testFeature("off", false, "", `"a"`, `"b"`))
	s.Create(t, testFeature("off-fallback", false, "B", `"a"`, `"b"`))
	c := newClientOf(t, s)
	of := sdkOver(t, c)
	ctx := context.Background()
	noKey := openfeature.NewTargetlessEvaluationContext(map[string]any{"plan": "pro"})
	withKey := openfeature.NewEvaluationContext("u1", nil)

	for _, tt := range []struct {
		key    string
		ec     openfeature.EvaluationContext
		value  string
		reason openfeature.Reason
		code   openfeature.ErrorCode
	}{
		{"one", noKey, "only", openfeature.StaticReason, ""},
		{"one", withKey, "only", openfeature.StaticReason, ""},
		{"off", noKey, "default", openfeature.DisabledReason, ""},
		{"off-fallback", noKey, "b", openfeature.DisabledReason, ""},
		// One bucket behind overrides: OpenFeature's default variant.
		{"overridden", withKey, "ring", openfeature.DefaultReason, ""},
		{"overridden", openfeature.NewEvaluationContext("vip-user", nil), "vip", openfeature.TargetingMatchReason, ""},
		{"overridden", noKey, "default", openfeature.ErrorReason, openfeature.TargetingKeyMissingCode},
		{"split", noKey, "default", openfeature.ErrorReason, openfeature.TargetingKeyMissingCode},
		{"split", withKey, "", openfeature.SplitReason, ""},
		{"missing", noKey, "default", openfeature.ErrorReason, openfeature.FlagNotFoundCode},
	} {
		d, _ := of.StringValueDetails(ctx, tt.key, "default", tt.ec)
		if d.Reason != tt.reason || d.ErrorCode != tt.code || tt.value != "" && d.Value != tt.value {
			t.Errorf("%s (key %q): %+v; want value %q, reason %s, error %q", tt.key, tt.ec.TargetingKey(), d, tt.value, tt.reason, tt.code)
		}
	}

	// Giving "split" all its ring makes it static: the next snapshot
	// says so.
	req, _ := http.NewRequest("PUT", s.URL+"/api/features/split/buckets/B", strings.NewReader(`{"replicas":0}`))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("PUT bucket B of split: %s", res.Status)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, _ := of.StringValueDetails(ctx, "split", "default", noKey)
		if d.Reason == openfeature.StaticReason && d.Value == "a" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("split with one bucket, without a key: %+v; want a, STATIC", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if e, err := c.Snapshot().Peek("split", "u1"); err != nil || e.Reason != feature.ReasonRing {
		t.Errorf("the client's own evaluation: %+v, %v", e, err)
	}
}
