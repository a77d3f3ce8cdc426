package experiment

// SetMaxPending sets how many first exposures wait for a flush before
// more are dropped (maxPendingExposures, 131,072, is slow to fill in a
// test).
func (e *Experiments) SetMaxPending(n int) { e.maxPending = n }
