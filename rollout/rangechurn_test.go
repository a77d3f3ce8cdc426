package rollout_test

import (
	"math"
	"testing"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
)

func shareList(kv ...any) []feature.BucketShare {
	var out []feature.BucketShare
	for i := 0; i < len(kv); i += 2 {
		out = append(out, feature.BucketShare{Bucket: kv[i].(string), Share: kv[i+1].(float64)})
	}
	return out
}

// TestRangeChurn pins what range bucketing moves, worked by hand.
func TestRangeChurn(t *testing.T) {
	third := 1.0 / 3
	for _, tc := range []struct {
		name          string
		before, after []feature.BucketShare
		want          float64
	}{
		{"thirds to quarters", shareList("A", third, "B", third, "C", third), shareList("A", 0.25, "B", 0.25, "C", 0.25, "D", 0.25), 0.5},
		{"no change", shareList("A", 0.3, "B", 0.7), shareList("A", 0.3, "B", 0.7), 0},
		{"50 to 10", shareList("on", 0.5, "off", 0.5), shareList("on", 0.1, "off", 0.9), 0.4},
		{"off first, 50 to 10", shareList("off", 0.5, "on", 0.5), shareList("off", 0.9, "on", 0.1), 0.4},
		{"remove the middle", shareList("A", third, "B", third, "C", third), shareList("A", 0.5, "B", 0.0, "C", 0.5), third},
		{"order swapped", shareList("A", 0.5, "B", 0.5), shareList("B", 0.5, "A", 0.5), 1},
		{"from nothing", nil, shareList("A", 1.0), 1},
		{"nothing to nothing", nil, nil, 0},
	} {
		if got := feature.RangeChurn(tc.before, tc.after); math.Abs(got-tc.want) > 1e-15 {
			t.Errorf("%s: RangeChurn = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestReportRangeChurn: a churn report gives range bucketing's churn for
// the same shares, in each version's bucket order, beside modulo's.
func TestReportRangeChurn(t *testing.T) {
	before := feature.Feature{Key: "f", Enabled: true, Salt: "f", Version: 1, Buckets: []feature.Bucket{{Name: "A", Replicas: 1000}, {Name: "B", Replicas: 1000}, {Name: "C", Replicas: 1000}}}
	after := before.Clone()
	after.Version = 2
	after.Buckets = append(after.Buckets, feature.Bucket{Name: "D", Replicas: 1000})
	rep := rollout.NewReport(before, after)
	want := feature.RangeChurn(
		shareList("A", rep.SharesBefore["A"], "B", rep.SharesBefore["B"], "C", rep.SharesBefore["C"]),
		shareList("A", rep.SharesAfter["A"], "B", rep.SharesAfter["B"], "C", rep.SharesAfter["C"], "D", rep.SharesAfter["D"]))
	if rep.RangeChurn != want || math.Abs(rep.RangeChurn-0.5) > 0.05 || rep.ModuloChurn != 0.75 {
		t.Errorf("report: range churn %v (want %v, about 0.5), modulo %v (want 0.75), ring %v", rep.RangeChurn, want, rep.ModuloChurn, rep.Churn)
	}
	t.Logf("A/B/C → A/B/C/D: ring %.4f, range %.4f, modulo %.4f", rep.Churn, rep.RangeChurn, rep.ModuloChurn)
}
