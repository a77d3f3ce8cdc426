package api

import "context"

// SetPlanHook calls start in each plan's slot before its search, with the
// search's context, and the func start returns (if not nil) once the slot
// is free again, until the test ends.
func SetPlanHook(t interface{ Cleanup(func()) }, start func(context.Context) func()) {
	planHook.Store(&start)
	t.Cleanup(func() { planHook.Store(nil) })
}
