package rollout

import (
	"context"
	"time"
)

// every runs do at every interval until ctx is done, and first at once when
// atOnce is set: the loop of each of the service's background jobs (ramps,
// sweeps, flushes, token refreshes), which run on their caller's goroutine.
// do's failures go to report (nil drops them), but not those that come of
// ctx ending.
func every(ctx context.Context, interval time.Duration, atOnce bool, do func(context.Context) error, report func(error)) {
	run := func() {
		if err := do(ctx); err != nil && ctx.Err() == nil && report != nil {
			report(err)
		}
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	if atOnce {
		run()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			run()
		}
	}
}
