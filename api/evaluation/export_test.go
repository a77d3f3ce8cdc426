package evaluation

import (
	"sync"
	"time"
)

// SyncEncodings returns how many sync documents the package has encoded.
func SyncEncodings() int64 { return syncEncodings.Load() }

// HoldSyncEncoding makes each encoding of a sync document wait, for up to
// 10 s, until n requests have found the document stale, until the test
// ends: without a single flight, n requests that arrive together would
// each encode it.
func HoldSyncEncoding(t interface{ Cleanup(func()) }, n int64) {
	syncEncodeHook = func(stale func() int64) {
		for deadline := time.Now().Add(10 * time.Second); stale() < n && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	t.Cleanup(func() { syncEncodeHook = nil })
}

// RaceEnabled: the tests run under the race detector, which makes the
// server's own work several times slower.
const RaceEnabled = raceEnabled

// HoldCostlySlots makes every request that takes a slot of costly
// evaluations signal entered, then hold the slot until release is called
// (or the test ends).
func HoldCostlySlots(t interface{ Cleanup(func()) }) (entered <-chan struct{}, release func()) {
	in, out := make(chan struct{}, 16), make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(out) }) }
	hook := func() {
		in <- struct{}{}
		<-out
	}
	costlyHook.Store(&hook)
	t.Cleanup(func() {
		release()
		costlyHook.Store(nil)
	})
	return in, release
}
