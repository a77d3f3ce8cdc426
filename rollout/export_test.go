package rollout

import "github.com/rollout/rollout/rollout/feature"

// NewReport returns the churn report of the change from before to after; a
// zero before (no key) is the feature's creation.
func NewReport(before, after feature.Feature) feature.Report {
	var cb *feature.Compiled
	if before.Key != "" {
		cb = feature.Compile(before, nil)
	}
	return feature.Compile(after, nil).ReportFrom(cb)
}
