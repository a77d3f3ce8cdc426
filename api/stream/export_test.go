package stream

import "time"

// SetHeartbeat sets the interval of the streams' heartbeats until the test
// ends.
func SetHeartbeat(t interface{ Cleanup(func()) }, d time.Duration) {
	old := heartbeatInterval
	heartbeatInterval = d
	t.Cleanup(func() { heartbeatInterval = old })
}

// SetStreamWriteWindow sets the window of each write of the streams of the
// servers made until the test ends.
func SetStreamWriteWindow(t interface{ Cleanup(func()) }, d time.Duration) {
	old := streamWriteWindow
	streamWriteWindow = d
	t.Cleanup(func() { streamWriteWindow = old })
}

// StreamQueue is how many events may wait behind a stream's write.
const StreamQueue = streamQueue

// SetMaxChangeEvent sets the bound of a change event's sync forms until
// the test ends.
func SetMaxChangeEvent(t interface{ Cleanup(func()) }, n int) {
	old := maxChangeEvent
	maxChangeEvent = n
	t.Cleanup(func() { maxChangeEvent = old })
}
