package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/rollout/rollout/api/client"
	"github.com/rollout/rollout/rollout"
)

// TestExposuresOfADeletedFeature: counts of a feature deleted since the
// client evaluated it do not make the server refuse the client's batch:
// the other counts arrive, and the client has nothing left to send again.
func TestExposuresOfADeletedFeature(t *testing.T) {
	s := newServer(t)
	c := newClient(t, client.Config{URL: s.URL, FlushInterval: time.Hour})
	for _, user := range users(50) {
		c.Evaluate("f02", user)
		c.Evaluate("f03", user)
	}
	ctx := context.Background()
	if _, err := s.Svc.Archive(ctx, "f03", rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatalf("Flush() with counts of a deleted feature = %v, want nil", err)
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatalf("Flush() again = %v, want nil (nothing left to send)", err)
	}
	rep, err := s.Svc.Exposures(ctx, "f02")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total != 50 {
		t.Errorf("exposures of f02 = %d, want the client's 50", rep.Total)
	}
}
