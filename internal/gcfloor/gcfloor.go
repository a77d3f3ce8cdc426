// Package gcfloor keeps the garbage collector's heap goal at or above a
// floor.
//
// A server whose live heap is small (rollout's is a few megabytes: the
// compiled features, the dashboard's templates, the metrics) but which
// allocates a few kilobytes for every request collects, with Go's default
// GOGC of 100, every time it has allocated as much again as it keeps: every
// thousand requests or so, each collection marking the whole live heap.
// Under load that is a tenth of the instructions of an evaluation. With a
// floor, the heap may grow to the floor before a collection: one every
// floor/(bytes per request) requests.
//
// After each collection the percentage (GOGC) is set from the live heap it
// found: max(100, 100·(floor/live − 1)), at most MaxPercent. A live heap of
// half the floor or more leaves GOGC at 100, Go's default, so that a big
// deployment's heap grows as it would without the floor. Start arms it;
// the process's environment variables GOGC and GOMEMLIMIT, when set, are
// the operator's choice, and callers leave the collector alone then
// (Wanted).
package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// MaxPercent bounds the percentage Start sets: a nearly empty heap does
// not make GOGC unbounded.
const MaxPercent = 5000

// defaultPercent is Go's GOGC when the environment sets none.
const defaultPercent = 100

// The runtime's metrics read: the heap the last collection found live,
// and the percentage in force.
const (
	liveHeap = "/gc/heap/live:bytes"
	gogc     = "/gc/gogc:percent"
)

// read returns the runtime metric name (0 when the runtime has none).
func read(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// The tuner is one per process, however many callers start it: the
// percentage is the process's.
var (
	mu       sync.Mutex
	starts   int    // callers that started it and have not stopped
	floor    uint64 // the highest floor of those started
	previous int    // the percentage before the first start
	cycle    uint64 // the arming in force; a stop ends it
)

// Wanted reports whether the process's environment (read with getenv)
// leaves the collector to the program: neither GOGC nor GOMEMLIMIT set.
func Wanted(getenv func(string) string) bool {
	return getenv("GOGC") == "" && getenv("GOMEMLIMIT") == ""
}

// Start keeps the heap goal at or above bytes from the next collection
// on, until the returned stop is called (once). Calls may overlap: the
// highest floor of those not stopped applies, and the last stop restores
// the percentage there was before the first Start.
func Start(bytes uint64) (stop func()) {
	mu.Lock()
	defer mu.Unlock()
	if starts == 0 {
		previous = int(read(gogc))
		cycle++
		arm(cycle)
	}
	starts++
	floor = max(floor, bytes)
	adjustLocked()
	var once sync.Once
	return func() {
		once.Do(func() {
			mu.Lock()
			defer mu.Unlock()
			if starts--; starts == 0 {
				cycle++ // the armed cleanup finds its cycle over
				floor = 0
				debug.SetGCPercent(previous)
			}
		})
	}
}

// sentinel is an object nothing refers to, whose cleanup runs after the
// collection that finds it unreachable: one a cycle. It holds a pointer
// so that it is not batched with other small objects by the tiny
// allocator, which would keep it alive as long as they are.
type sentinel struct{ _ *int }

// arm makes a sentinel whose cleanup adjusts the percentage and arms the
// next, for as long as cycle c is in force.
func arm(c uint64) {
	runtime.AddCleanup(new(sentinel), func(c uint64) {
		mu.Lock()
		defer mu.Unlock()
		if c != cycle {
			return // stopped
		}
		adjustLocked()
		arm(c)
	}, c)
}

// adjustLocked sets the percentage for the live heap the last collection
// found (none yet: nothing changes).
func adjustLocked() {
	if p := Percent(floor, read(liveHeap)); p > 0 {
		debug.SetGCPercent(p)
	}
}

// Percent is the GOGC that gives a live heap of live bytes a heap goal of
// at least floor bytes: 100 when 100 already does, at most MaxPercent;
// 0 when live is 0 (no collection yet: nothing to go by).
func Percent(floor, live uint64) int {
	if live == 0 {
		return 0
	}
	ratio := 100 * floor / live // the goal floor is, in percent of live
	if ratio <= 2*defaultPercent {
		return defaultPercent
	}
	return int(min(ratio-100, MaxPercent))
}
