package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/rollout/rollout/api/client"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
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

// TestExposuresPerRule: the client's batches say which rule served each
// count, so the server's rules preview estimates a rule's removal from the
// client's evaluations.
func TestExposuresPerRule(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	pro := []feature.Rule{{Name: "pro", Conditions: []feature.Condition{{Attribute: "plan", Op: "eq", Value: raw(`"pro"`)}},
		Serve: feature.Serve{Bucket: "C"}}}
	if _, err := s.Svc.Change(ctx, "f01", change.SetRules(pro), rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, client.Config{URL: s.URL, FlushInterval: time.Hour})
	const matching, others = 23, 9
	for i, user := range users(matching + others) {
		plan := "free"
		if i < matching {
			plan = "pro"
		}
		if e, err := c.EvaluateContext("f01", user, feature.Context{"plan": plan}); err != nil || (plan == "pro") != (e.Rule == "pro") {
			t.Fatalf("EvaluateContext(f01, %s, plan %s) = %+v, %v", user, plan, e, err)
		}
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatalf("Flush() = %v", err)
	}
	res, err := s.Svc.Change(ctx, "f01", change.SetRules(nil), rollout.ChangeOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Report.Rules) != 1 || res.Report.Rules[0].Estimate == nil || res.Report.Rules[0].Estimate.UpTo != matching {
		t.Errorf("preview of removing rule pro: %+v, want an estimate of up to %d", res.Report.Rules, matching)
	}
	rep, err := s.Svc.Exposures(ctx, "f01")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total != matching+others {
		t.Errorf("exposures of f01 = %d, want the client's %d", rep.Total, matching+others)
	}
}
