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
