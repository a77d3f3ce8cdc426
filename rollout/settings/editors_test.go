package settings

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/rollout/rollout/rollout/feature"
)

// TestUnmatchedChurn: the share of the users no rule with conditions
// matches that a change of rules moves, beyond the ring's churn.
func TestUnmatchedChurn(t *testing.T) {
	shares := map[string]float64{"A": 0.3, "B": 0.7}
	rep := feature.Report{SharesBefore: shares, SharesAfter: shares}
	cond := []feature.Condition{{Attribute: "plan", Op: feature.OpEq, Value: json.RawMessage(`"pro"`)}}
	staff := feature.Rule{Name: "staff", Conditions: cond, Serve: feature.Serve{Bucket: "A"}}
	all := func(s feature.Serve) feature.Rule {
		return feature.Rule{Name: "all", Conditions: []feature.Condition{}, Serve: s}
	}
	f := func(by string, rules ...feature.Rule) feature.Feature {
		return feature.Feature{Enabled: true, BucketBy: by, Rules: rules}
	}
	for _, c := range []struct {
		name          string
		before, after feature.Feature
		want          float64
	}{
		{"no rules", f(""), f(""), 0},
		{"a rule with conditions", f(""), f("", staff), 0},
		{"the ring to one bucket", f("", staff), f("", staff, all(feature.Serve{Bucket: "A"})), 0.7},
		{"one bucket to the ring", f("", all(feature.Serve{Bucket: "B"})), f(""), 0.3},
		{"one bucket to another", f("", all(feature.Serve{Bucket: "A"})), f("", all(feature.Serve{Bucket: "B"})), 1},
		{"the same bucket", f("", all(feature.Serve{Bucket: "A"}), staff), f("", all(feature.Serve{Bucket: "A"})), 0},
		{"the ring, explicitly", f(""), f("", all(feature.Serve{Ring: true})), 0},
		{"the ring by another attribute", f(""), f("", all(feature.Serve{Ring: true, BucketBy: "org"})), 1 - 0.09 - 0.49},
		{"disabled before", feature.Feature{Rules: []feature.Rule{all(feature.Serve{Bucket: "A"})}}, f(""), 0},
	} {
		if got := unmatchedChurn(c.before, c.after, rep); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: unmatchedChurn = %v, want %v", c.name, got, c.want)
		}
	}
}
