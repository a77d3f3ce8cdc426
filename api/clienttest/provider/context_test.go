package provider_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/open-feature/go-sdk/openfeature"

	"github.com/rollout/rollout/api/clienttest/internal/testserver"
	"github.com/rollout/rollout/rollout/feature"
)

// TestContextLimits: a context the server would refuse is INVALID_CONTEXT
// through the SDK, the code's default served.
func TestContextLimits(t *testing.T) {
	s := testserver.Start(t)
	s.Create(t, testFeature("f", true, "", `"a"`, `"b"`))
	of := sdkOver(t, newClientOf(t, s))
	many := map[string]any{}
	for i := range feature.MaxContextAttrs + 1 {
		many[fmt.Sprintf("a%d", i)] = "v"
	}
	large := map[string]any{}
	for i := range feature.MaxContextBytes/feature.MaxContextValueLen + 1 {
		large[fmt.Sprintf("a%d", i)] = strings.Repeat("x", feature.MaxContextValueLen)
	}
	for name, attrs := range map[string]map[string]any{
		"too many attributes": many,
		"a string too long":   {"email": strings.Repeat("x", feature.MaxContextValueLen+1)},
		"a list too long":     {"groups": make([]string, feature.MaxContextList+1)},
		"a context too large": large,
	} {
		d, err := of.StringValueDetails(context.Background(), "f", "default", openfeature.NewEvaluationContext("u1", attrs))
		if err == nil || d.ErrorCode != openfeature.InvalidContextCode || d.Value != "default" {
			t.Errorf("%s: %+v, %v; want the default and INVALID_CONTEXT", name, d, err)
		}
	}
}

// TestPlanAttribute: the attribute "plan" of the example of docs/client.md
// (and the README's) serves what a rule on it says, once the rule is set
// with PUT /api/features/K/rules; a user of another plan gets the ring.
func TestPlanAttribute(t *testing.T) {
	s := testserver.Start(t)
	s.Create(t, testFeature("checkout", true, "", `"A"`, `"B"`, `"C"`, `"D"`))
	req, _ := http.NewRequest("PUT", s.URL+"/api/features/checkout/rules", strings.NewReader(
		`{"rules":[{"name":"pro-plan","conditions":[{"attribute":"plan","op":"eq","value":"pro"}],"serve":{"bucket":"D"}}]}`))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("PUT rules: %d %s", res.StatusCode, body)
	}
	c := newClientOf(t, s)
	if f, _ := c.Snapshot().Feature("checkout"); len(f.Rules) == 0 {
		t.Skip("the sync form does not carry rules yet: the in-app client cannot evaluate them")
	}
	of := sdkOver(t, c)
	ctx := context.Background()
	for i := range 50 {
		user := fmt.Sprintf("user%d", i)
		pro, err := of.StringValueDetails(ctx, "checkout", "none", openfeature.NewEvaluationContext(user, map[string]any{"plan": "pro"}))
		if err != nil || pro.Value != "D" || pro.Reason != openfeature.TargetingMatchReason || pro.FlagMetadata["rule"] != "pro-plan" {
			t.Errorf("%s on plan pro: %+v, %v; want D by the rule pro-plan", user, pro, err)
		}
		free, err := of.StringValueDetails(ctx, "checkout", "none", openfeature.NewEvaluationContext(user, map[string]any{"plan": "free"}))
		e, _ := c.Snapshot().Peek("checkout", user)
		if err != nil || free.Variant != e.Bucket || free.Reason != openfeature.SplitReason {
			t.Errorf("%s on plan free: %+v, %v; want the ring's %s, SPLIT", user, free, err, e.Bucket)
		}
	}
}
