package api

import (
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rollout/rollout/rollout/auth"
)

// RouteAccess returns what each route that New declares with opts needs,
// opts.Routes included, by "METHOD pattern".
func RouteAccess(opts Options) map[string]auth.Permission {
	s := &Server{metrics: NewMetrics()}
	out := map[string]auth.Permission{}
	for _, r := range append(s.routes(opts), opts.Routes...) {
		if r.Method != echo.RouteNotFound {
			out[r.Method+" "+r.Path] = r.Access
		}
	}
	return out
}

// MaxHistoryBytes is maxHistoryBytes, the bytes of entries past the first
// that one history answer may hold.
const MaxHistoryBytes = maxHistoryBytes

// SetBodyWindows sets how long routes wait for a request body, evaluation's
// and the others', until the test ends.
func SetBodyWindows(t interface{ Cleanup(func()) }, app, other time.Duration) {
	oldApp, oldOther := appBodyWindow, bodyWindow
	appBodyWindow, bodyWindow = app, other
	t.Cleanup(func() { appBodyWindow, bodyWindow = oldApp, oldOther })
}

// SetMaxActiveTokens sets how many active tokens POST /api/tokens allows
// until the test ends.
func SetMaxActiveTokens(t interface{ Cleanup(func()) }, n int) {
	old := maxActiveTokens
	maxActiveTokens = n
	t.Cleanup(func() { maxActiveTokens = old })
}

// RaceEnabled: the tests run under the race detector, which makes the
// server's own work several times slower.
const RaceEnabled = raceEnabled

// SetScheduleRate sets the rate and burst of schedules a token makes until
// the test ends.
func SetScheduleRate(t interface{ Cleanup(func()) }, rate float64, burst int) {
	oldRate, oldBurst := scheduleCreateRate, scheduleCreateBurst
	scheduleCreateRate, scheduleCreateBurst = rate, burst
	t.Cleanup(func() { scheduleCreateRate, scheduleCreateBurst = oldRate, oldBurst })
}

// SetListHook sets a hook that each user-list upload calls in its slot,
// before its body is read, until the test ends.
func SetListHook(t interface{ Cleanup(func()) }, h func()) {
	listHook = h
	t.Cleanup(func() { listHook = nil })
}
