package rollout

import "sync/atomic"

// evaluate returns the bucket c serves user and counts it, as the
// snapshot's Evaluate does.
func (c *compiled) evaluate(user string) Evaluation {
	var e Evaluation
	c.evaluateInto(&e, user)
	return e
}

// NewReport returns the churn report of the change from before to after; a
// zero before (no key) is the feature's creation.
func NewReport(before, after Feature) Report {
	var cb *compiled
	if before.Key != "" {
		cb = compile(before)
	}
	return newReport(cb, compile(after))
}

// CoarseLimits are the limits plans of no mode keep on features that fit
// them.
var CoarseLimits = coarseLimits

// CountMatchedBytes counts the bytes that patterns scan until t ends: the
// returned function reads the count. Tests that use it do not run in
// parallel.
func CountMatchedBytes(t interface{ Cleanup(func()) }) func() int64 {
	var n atomic.Int64
	hook := func(b int) { n.Add(int64(b)) }
	matchHook.Store(&hook)
	t.Cleanup(func() { matchHook.Store(nil) })
	return n.Load
}

// CountConditionChecks counts the conditions that evaluations test until t
// ends: the returned function reads the count. Tests that use it do not
// run in parallel.
func CountConditionChecks(t interface{ Cleanup(func()) }) func() int64 {
	var n atomic.Int64
	hook := func() { n.Add(1) }
	checkHook.Store(&hook)
	t.Cleanup(func() { checkHook.Store(nil) })
	return n.Load
}
