package exposure

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rollout/rollout/rollout/feature"
)

// EstimateRules sets the Estimate of each population of rep.Rules: up to
// how many evaluations a day its source rules served, from the counts of
// the feature of ID id per rule (stored, of the last 24 hours, as
// rollout.ExposureStore.RuleExposures returns them; those of another
// feature are left out) and those still in memory in the compiled
// versions inMemory.
func EstimateRules(rep *feature.Report, id string, stored []feature.Exposure, inMemory []*feature.Compiled) {
	byRule := map[string]int64{}
	for _, e := range stored {
		if e.FeatureID == id && e.Rule != nil {
			byRule[*e.Rule] = feature.AddCounts(byRule[*e.Rule], e.Count)
		}
	}
	for _, c := range inMemory {
		for _, e := range c.Counts(nil) {
			byRule[*e.Rule] = feature.AddCounts(byRule[*e.Rule], e.Count)
		}
	}
	for i := range rep.Rules {
		p := &rep.Rules[i]
		var n int64
		for _, r := range p.Sources() {
			n = feature.AddCounts(n, byRule[r])
		}
		p.Estimate = &feature.PopulationEstimate{UpTo: n, From: p.Sources(), Text: fmt.Sprintf("up to %s evaluations a day", thousands(n))}
	}
}

// thousands writes n with commas between groups of three digits.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, d := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	return b.String()
}
