package api

import "time"

// RouteAccess is routeAccess, for tests of the access table.
var RouteAccess = routeAccess

// SetHeartbeat sets the interval of the sync stream's heartbeats until the
// test ends.
func SetHeartbeat(t interface{ Cleanup(func()) }, d time.Duration) {
	old := heartbeatInterval
	heartbeatInterval = d
	t.Cleanup(func() { heartbeatInterval = old })
}

// SyncEncodings returns how many sync documents the package has encoded.
func SyncEncodings() int64 { return syncEncodings.Load() }

// SetMaxChangeEvent sets the bound of a change event's sync forms until
// the test ends.
func SetMaxChangeEvent(t interface{ Cleanup(func()) }, n int) {
	old := maxChangeEvent
	maxChangeEvent = n
	t.Cleanup(func() { maxChangeEvent = old })
}

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
