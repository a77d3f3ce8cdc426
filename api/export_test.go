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
