package evaluation

import (
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/rollout/feature"
)

// Costly evaluations run apart. An evaluation of a feature whose rules may
// cost much (feature.Snapshot.Costly: more condition checks and pattern
// instructions than feature.CostlyEvaluation), or a request whose body (or
// GET's query of a context) is over costlyBodyBytes, runs in one of a few slots, so that such work,
// however much of it clients send, never takes every core from the
// ordinary evaluations beside it. A request waits for a slot a short
// while, then is refused with 503 and a Retry-After. Ordinary evaluations
// (a small body, features of ordinary rules) take no slot and pay one
// comparison for it.

// CostlyLimits bound the costly evaluations of a server. The zero value is
// the defaults.
type CostlyLimits struct {
	// Running is how many costly evaluations run at once. 0 means half of
	// GOMAXPROCS, at least 1.
	Running int
	// Wait is how long a costly evaluation waits for a slot before it is
	// refused; 0 means DefaultCostlyWait.
	Wait time.Duration
}

// DefaultCostlyWait is how long a costly evaluation waits for a slot.
const DefaultCostlyWait = 250 * time.Millisecond

// costlyBodyBytes is the size over which an evaluation request's body is
// costly to read: far more than an app's context and a list of keys.
const costlyBodyBytes = 16 << 10

// costlyRetryAfter is the Retry-After, in seconds, of a refused costly
// evaluation.
const costlyRetryAfter = 1

// costlyHook, when set (by tests), is called in a slot as it is taken.
var costlyHook atomic.Pointer[func()]

// costly holds the slots of costly evaluations.
type costly struct {
	slots chan struct{}
	wait  time.Duration
}

func newCostly(l CostlyLimits) *costly {
	running := l.Running
	if running <= 0 {
		running = max(1, runtime.GOMAXPROCS(0)/2)
	}
	wait := l.Wait
	if wait <= 0 {
		wait = DefaultCostlyWait
	}
	return &costly{slots: make(chan struct{}, running), wait: wait}
}

// slot is one request's hold on a slot of costly evaluations: it takes
// one at its first costly evaluation and keeps it until done.
type slot struct {
	held bool
}

// take takes a slot for the request c unless it holds one: at once when
// one is free, else within the wait; then, or when the request's client
// has gone, it answers 503 with a Retry-After. A request that holds a
// slot is refused when its client has gone, so that a long bulk
// evaluation stops with its client.
func (sl *slot) take(c echo.Context, p *costly) error {
	ctx := c.Request().Context()
	if sl.held {
		if ctx.Err() != nil {
			return feature.Errorf(feature.EUnavailable, "the request ended before its evaluations did")
		}
		return nil
	}
	select {
	case p.slots <- struct{}{}:
	default:
		t := time.NewTimer(p.wait)
		defer t.Stop()
		select {
		case p.slots <- struct{}{}:
		case <-t.C:
			c.Response().Header().Set("Retry-After", strconv.Itoa(costlyRetryAfter))
			return feature.Errorf(feature.EUnavailable, "as many costly evaluations are running as this server runs at once (%d): try again in a second, or evaluate features of fewer conditions and patterns with a smaller request", cap(p.slots))
		case <-ctx.Done():
			return feature.Errorf(feature.EUnavailable, "the request ended before its evaluation could start")
		}
	}
	sl.held = true
	if h := costlyHook.Load(); h != nil {
		(*h)()
	}
	return nil
}

// release gives the slot back, if held.
func (sl *slot) release(p *costly) {
	if sl.held {
		sl.held = false
		<-p.slots
	}
}
