package audit_test

import (
	"testing"

	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/feature"
)

func TestShareSummary(t *testing.T) {
	tests := []struct {
		name string
		r    feature.Report
		want string
	}{
		{"the issue's example", feature.Report{
			Method: feature.MethodExact, Churn: 0.3995,
			SharesBefore: map[string]float64{"control": 0.5, "treatment": 0.5},
			SharesAfter:  map[string]float64{"control": 0.9, "treatment": 0.1},
			Moves:        []feature.Move{{From: "treatment", To: "control", Share: 0.3995}},
		}, "control 50 % → 90 %, treatment 50 % → 10 %; 39.95 % of users moved, all into control"},
		{"nobody moves", feature.Report{
			SharesBefore: map[string]float64{"a": 1}, SharesAfter: map[string]float64{"a": 1}, Moves: []feature.Move{},
		}, "no user moved"},
		{"to several buckets, and to none", feature.Report{
			Method: feature.MethodExact, Churn: 0.6,
			SharesBefore:    map[string]float64{"a": 1},
			SharesAfter:     map[string]float64{"a": 0.4, "b": 0.2},
			Moves:           []feature.Move{{From: "a", To: "b", Share: 0.2}, {From: "a", To: "", Share: 0.4}},
			OverrideChanges: []feature.OverrideChange{{User: "u1"}, {User: "u2"}},
		}, "a 100 % → 40 %, b 0 % → 20 %; 60 % of users moved: 40 % into no bucket, 20 % into b; 2 overridden users moved"},
		{"a rule's population, the ring unchanged", feature.Report{
			SharesBefore: map[string]float64{"on": 0.1, "off": 0.9}, SharesAfter: map[string]float64{"on": 0.1, "off": 0.9}, Moves: []feature.Move{},
			Rules: []feature.PopulationChange{{Text: `users matching email ends with "@example.com": the ring → on`}},
		}, "the ring moved no user; users matching changed rules may have changed bucket"},
		{"a new salt", feature.Report{
			Method: feature.MethodExpected, Churn: 0.5,
			SharesBefore: map[string]float64{"a": 0.5, "b": 0.5}, SharesAfter: map[string]float64{"a": 0.5, "b": 0.5},
			Moves: []feature.Move{{From: "a", To: "b", Share: 0.25}, {From: "b", To: "a", Share: 0.25}},
		}, "about 50 % of users moved: 25 % into a, 25 % into b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := audit.ShareSummary(tt.r); got != tt.want {
				t.Errorf("audit.ShareSummary() = %q, want %q", got, tt.want)
			}
		})
	}
}
