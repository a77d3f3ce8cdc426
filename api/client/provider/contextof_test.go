package provider_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/open-feature/go-sdk/openfeature"
	"github.com/rollout/rollout/api/client/provider"
	"github.com/rollout/rollout/rollout/feature"
)

// TestContextOf: every attribute of an OpenFeature context but the
// targeting key (the user ID) reaches rollout, in the types its conditions
// read: lists of strings as
// []string, times as RFC 3339; what no condition can test (null, objects,
// lists of other things) is left out.
func TestContextOf(t *testing.T) {
	at := time.Date(2026, 12, 1, 13, 0, 0, 0, time.FixedZone("CET", 3600))
	got, err := provider.ContextOf(openfeature.FlattenedContext{
		"targetingKey": "u1", "plan": "pro", "age": int64(29), "ratio": 0.5, "staff": true,
		"groups": []any{"a", "b"}, "tags": []string{"x"}, "seen": at,
		"nothing": nil, "nested": map[string]any{"a": 1}, "mixed": []any{"a", 1},
	})
	want := feature.Context{
		"plan": "pro", "age": int64(29), "ratio": 0.5, "staff": true,
		"groups": []string{"a", "b"}, "tags": []string{"x"}, "seen": "2026-12-01T12:00:00Z",
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("contextOf = %#v, %v; want %#v", got, err, want)
	}
	// Values of the types rollout reads: the map itself, not a copy.
	flat := openfeature.FlattenedContext{"plan": "pro", "n": 3}
	same, _ := provider.ContextOf(flat)
	same["x"] = "y"
	if flat["x"] != "y" {
		t.Error("contextOf copied a context it could pass on as it is")
	}
}
