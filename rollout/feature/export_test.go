package feature

import "sync/atomic"

// evaluate returns the bucket c serves user and counts it, as the
// snapshot's Evaluate does.
func (c *Compiled) evaluate(user string) Evaluation {
	var e Evaluation
	c.evaluateInto(&e, user)
	return e
}

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
