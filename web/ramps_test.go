package web

import (
	"testing"
	"time"

	"github.com/rollout/rollout/rollout/ramp"
)

func TestUntil(t *testing.T) {
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Minute, "due now"},
		{0, "due now"},
		{20 * time.Second, "in less than a minute"},
		{45 * time.Minute, "in 45 min"},
		{time.Hour, "in 1 h"},
		{3*time.Hour + 20*time.Minute, "in 3 h 20 min"},
		{24 * time.Hour, "in 1 d"},
		{7*24*time.Hour + 5*time.Hour, "in 7 d 5 h"},
	} {
		if got := until(now.Add(c.d), now); got != c.want {
			t.Errorf("until(now+%s) = %q, want %q", c.d, got, c.want)
		}
	}
}

// TestRampViews: newest first; the next step only for a live ramp; the
// count of applied steps.
func TestRampViews(t *testing.T) {
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	applied := at.Add(time.Second)
	steps := []ramp.Step{{Share: 0.1, At: at, Applied: &applied, Version: 2, Reached: 0.1}, {Share: 0.5, At: at.Add(time.Hour)}}
	vs := rampViews([]ramp.Ramp{
		{ID: "old", State: ramp.Canceled, Steps: steps, Next: 1},
		{ID: "new", State: ramp.Paused, Steps: steps, Next: 1},
	})
	if len(vs) != 2 || vs[0].ID != "new" || vs[1].ID != "old" {
		t.Fatalf("views = %+v, want new then old", vs)
	}
	if vs[0].Next == nil || vs[0].Next.N != 2 || !vs[0].Steps[1].IsNext || vs[0].Applied != 1 || !vs[0].Live {
		t.Errorf("paused ramp's view = %+v", vs[0])
	}
	if vs[1].Next != nil || vs[1].Steps[1].IsNext || vs[1].Live {
		t.Errorf("a canceled ramp has a next step: %+v", vs[1])
	}
}
