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

// MaxHistoryBytes is maxHistoryBytes, the bytes of entries past the first
// that one history answer may hold.
const MaxHistoryBytes = maxHistoryBytes
