package rollout_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/document"
	"github.com/rollout/rollout/rollout/feature"
)

// TestSplitDocument: a document's split rule is planned when applied, and
// applying the feature's export again (its split ring with it), or the
// document with the rule renamed, changes nobody's bucket within the
// split.
func TestSplitDocument(t *testing.T) {
	svc, _ := newService(t)
	ctx := context.Background()
	yes, half := true, 0.5
	split := feature.Rule{Name: "pro", Conditions: []feature.Condition{{Attribute: "plan", Op: "eq", Value: json.RawMessage(`"pro"`)}},
		Serve: feature.Serve{Split: map[string]float64{"control": 0.2, "treatment": 0.8}}}
	doc := func(r feature.Rule) document.Document {
		return document.Document{Features: []document.Feature{{Key: "checkout", Enabled: &yes,
			Buckets: []document.Bucket{{Name: "control", Share: &half}, {Name: "treatment", Share: &half}}, Rules: []feature.Rule{r}}}}
	}
	if _, err := svc.ApplyDocument(ctx, doc(split), rollout.ApplyOptions{}); err != nil {
		t.Fatalf("ApplyDocument() = %v", err)
	}
	f, _ := svc.Snapshot().Feature("checkout")
	ring := f.Rules[0].Serve.SplitRing
	if !feature.SplitRingFits(ring, split.Serve.Split) {
		t.Fatalf("planned split ring %v misses 20/80", ring)
	}
	renamed := split
	renamed.Name = "pro-plan"
	p, err := svc.ApplyDocument(ctx, doc(renamed), rollout.ApplyOptions{})
	if err != nil {
		t.Fatalf("ApplyDocument(renamed) = %v", err)
	}
	f, _ = svc.Snapshot().Feature("checkout")
	if got := f.Rules[0].Serve.SplitRing; len(got) != len(ring) || got[0] != ring[0] || got[1] != ring[1] {
		t.Errorf("renamed rule's split ring %v, want %v", got, ring)
	}
	if len(p.Changes) != 1 || len(p.Changes[0].Report.Splits) != 0 {
		t.Errorf("renaming previews split moves: %+v", p.Changes)
	}
}
