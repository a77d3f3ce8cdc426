package rollout_test

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestExposuresLastDay: the report's LastDay counts the evaluations of
// the last 24 hours, stored or in memory, and not older ones.
func TestExposuresLastDay(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	svc := openServices(t, 1, clock.clock())[0]
	mustCreate(t, svc, onOff("f", 1, 1))
	evaluate := func(n int) {
		for i := range n {
			if _, err := svc.Snapshot().Evaluate("f", fmt.Sprintf("user-%d", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	evaluate(30) // two days ago, stored
	if err := svc.FlushExposures(ctx); err != nil {
		t.Fatal(err)
	}
	clock.Add(47 * time.Hour)
	evaluate(20) // an hour ago, stored
	if err := svc.FlushExposures(ctx); err != nil {
		t.Fatal(err)
	}
	clock.Add(time.Hour)
	evaluate(5) // in memory
	rep, err := svc.Exposures(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	if rep.LastDay != 25 || rep.Total != 55 {
		t.Errorf("LastDay %d of total %d, want 25 of 55", rep.LastDay, rep.Total)
	}
}
