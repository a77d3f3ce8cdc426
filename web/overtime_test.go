package web

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
)

// TestSharesChart: three versions an hour apart, drawn until an hour after
// the last: each version's bands start at its time and stack its shares;
// the kill switch's version has no bands; changes have churn bars; the
// words say every share.
func TestSharesChart(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	two := []feature.Bucket{{Name: "off", Replicas: 1}, {Name: "on", Replicas: 1}}
	f := feature.Feature{Key: "f", Buckets: two}
	versions := []rollout.Version{ // newest first
		{Version: 3, Time: t0.Add(2 * time.Hour), Config: f, Report: feature.Report{FromVersion: 2, Churn: 0.25, SharesAfter: map[string]float64{}}},
		{Version: 2, Time: t0.Add(time.Hour), Config: f, Report: feature.Report{FromVersion: 1, Churn: 0.25, SharesAfter: map[string]float64{"off": 0.25, "on": 0.75}}},
		{Version: 1, Time: t0, Config: f, Report: feature.Report{SharesAfter: map[string]float64{"off": 0.5, "on": 0.5}}},
	}
	c := newSharesChart(f, versions, t0.Add(3*time.Hour))
	if len(c.Bands) != 4 {
		t.Fatalf("bands = %+v, want 2 for each of versions 1 and 2", c.Bands)
	}
	step := (otRight - otLeft) / 3
	for i, want := range []struct{ x, y, h float64 }{
		{otLeft, otTop, otPlot / 2}, {otLeft, otTop + otPlot/2, otPlot / 2},
		{otLeft + step, otTop, otPlot / 4}, {otLeft + step, otTop + otPlot/4, otPlot * 3 / 4},
	} {
		b := c.Bands[i]
		if abs(b.X-want.x) > 1e-9 || abs(b.W-step) > 1e-9 || abs(b.Y-want.y) > 1e-9 || abs(b.H-want.h) > 1e-9 {
			t.Errorf("band %d = %+v, want x %v width %v y %v height %v", i, b, want.x, step, want.y, want.h)
		}
	}
	if len(c.Churn) != 2 || c.Churn[1].Label != "25.00%" || abs(c.Churn[1].X-(otLeft+2*step)) > 1e-9 || abs(c.Churn[1].H-otChurnPlot/4) > 1e-9 {
		t.Errorf("churn bars = %+v", c.Churn)
	}
	for _, want := range []string{"version 1, 2026-03-01 09:00 UTC: off 50.00%, on 50.00%", "version 3, 2026-03-01 11:00 UTC: no bucket served"} {
		if !strings.Contains(c.Summary, want) {
			t.Errorf("summary %q lacks %q", c.Summary, want)
		}
	}
	if c.Ticks[0].Label != "Mar 1 09:00" || c.Ticks[len(c.Ticks)-1].Label != "Mar 1 12:00" || c.Ticks[0].Anchor != "start" {
		t.Errorf("time ticks = %+v", c.Ticks)
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestTargetValues: the target fields start at the shares now, in
// hundredths of a percent that add up to exactly 100.
func TestTargetValues(t *testing.T) {
	for _, tt := range []struct {
		shares []float64
		want   string
	}{
		{[]float64{0.33702, 0.33071, 0.33227}, "[33.7 33.07 33.23]"},
		{[]float64{0.5, 0.5}, "[50 50]"},
		{[]float64{1.0 / 3, 1.0 / 3, 1.0 / 3}, "[33.34 33.33 33.33]"},
		{[]float64{0, 0}, "[0 0]"},
	} {
		if got := fmt.Sprint(targetValues(tt.shares)); got != tt.want {
			t.Errorf("targetValues(%v) = %s, want %s", tt.shares, got, tt.want)
		}
	}
}
