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

// SetMaxPending sets how many first exposures wait for a flush before
// more are dropped (maxPendingExposures, 131,072, is slow to fill in a
// test).
func (e *Experiments) SetMaxPending(n int) { e.maxPending = n }
