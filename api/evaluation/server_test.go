package evaluation_test

import (
	"encoding/json"
	"testing"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/api/internal/apitest"
	"github.com/rollout/rollout/rollout/feature"
)

// The API as package evaluation's routes are served: package api's router
// over a real SQLite store (package apitest).

func newRulesServer(t *testing.T) *apitest.Server {
	s := apitest.New(t, "", api.Options{})
	s.Create(feature.Feature{Key: "checkout", Enabled: true, Salt: "checkout",
		Buckets: []feature.Bucket{{Name: "off", Replicas: 100}, {Name: "on", Replicas: 100}}})
	return s
}

func ptr[T any](v T) *T { return &v }

// jsonText is s as it appears inside a JSON string.
func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}
