//go:build race

package plan_test

// raceEnabled: the race detector slows the planner's searches tenfold, so
// the measuring tests try fewer cases under it.
const raceEnabled = true
