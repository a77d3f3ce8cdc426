package web

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
)

// Geometry of the shares-over-time chart: x in percent of its width (the
// left column holds the share axis), y in pixels.
const (
	otLeft       = 6.0
	otRight      = 99.0
	otTop        = 8.0
	otPlot       = 180.0 // height of the shares, 0 % to 100 %
	otChurnTop   = otTop + otPlot + 34
	otChurnPlot  = 60.0 // height of a change that moves every user
	otTimeLabels = 5
)

// sharesChart is each bucket's share of users per version on a time axis,
// stacked (each version holds until the next one, the last until now), with
// the churn of each change drawn below at its time.
type sharesChart struct {
	Bands                                  []otBand
	Churn                                  []otChurn
	Ticks                                  []otTick // time axis
	YTicks                                 []otTick // share axis
	Legend                                 []segment
	Height                                 float64
	Summary                                string // the chart in words
	TimeY, ChurnBase, ChurnTop, PlotBottom float64
}

type otBand struct {
	X, W, Y, H float64
	Color      int
	Title      string
}

type otChurn struct {
	X, Y, H float64
	Label   string // written above bars of at least 5 %
	Anchor  string // text-anchor of the label: near the right edge it ends at the bar
	Title   string
}

type otTick struct {
	X, Y   float64
	Label  string
	Anchor string // text-anchor: the ends stay inside the chart
}

// newSharesChart draws versions (newest first) up to now, coloured as f's
// buckets, buckets that no longer exist after them.
func newSharesChart(f feature.Feature, versions []rollout.Version, now time.Time) sharesChart {
	c := sharesChart{Height: otChurnTop + otChurnPlot + 22, TimeY: otChurnTop + otChurnPlot + 18,
		ChurnBase: otChurnTop + otChurnPlot, ChurnTop: otChurnTop, PlotBottom: otTop + otPlot}
	if len(versions) == 0 {
		return c
	}
	vs := slices.Clone(versions)
	slices.Reverse(vs) // oldest first
	colour := colors(f)
	order := bucketNames(f)
	for _, v := range vs {
		for _, b := range v.Config.Buckets {
			if _, ok := colour[b.Name]; !ok {
				colour[b.Name] = len(colour) % palette
				order = append(order, b.Name)
			}
		}
	}
	start, end := vs[0].Time, now
	if !end.After(start) {
		end = start.Add(time.Minute)
	}
	span := float64(end.Sub(start))
	x := func(t time.Time) float64 { return otLeft + (otRight-otLeft)*float64(t.Sub(start))/span }

	var words []string
	for i, v := range vs {
		x0, x1 := x(v.Time), otRight
		if i+1 < len(vs) {
			x1 = x(vs[i+1].Time)
		}
		y := otTop
		var parts []string
		for _, name := range order {
			s := v.Report.SharesAfter[name]
			if s <= 0 {
				continue
			}
			h := otPlot * s
			c.Bands = append(c.Bands, otBand{X: x0, W: max(x1-x0, 0.15), Y: y, H: h, Color: colour[name],
				Title: fmt.Sprintf("v%d (%s): %s %s", v.Version, when(v.Time), name, pct(s))})
			y += h
			parts = append(parts, name+" "+pct(s))
		}
		if len(parts) == 0 {
			parts = []string{"no bucket served"}
		}
		words = append(words, fmt.Sprintf("version %d, %s: %s", v.Version, when(v.Time), strings.Join(parts, ", ")))
		if v.Report.FromVersion > 0 {
			h := otChurnPlot * v.Report.Churn
			ch := otChurn{X: x0, Y: otChurnTop + otChurnPlot - h, H: h, Anchor: "start", Title: fmt.Sprintf("v%d moved %s of users", v.Version, pct(v.Report.Churn))}
			if x0 > 90 {
				ch.Anchor = "end"
			}
			if v.Report.Churn >= 0.05 {
				ch.Label = pct(v.Report.Churn)
			}
			c.Churn = append(c.Churn, ch)
		}
	}
	c.Summary = "Shares of users per version over time, oldest first: " + strings.Join(words, "; ")

	layout := "Jan 2 15:04"
	switch d := end.Sub(start); {
	case d > 3*24*time.Hour:
		layout = "Jan 2"
	case d < 10*time.Minute:
		layout = "15:04:05"
	}
	for i := range otTimeLabels {
		t := start.Add(time.Duration(float64(i) / float64(otTimeLabels-1) * span))
		anchor := "middle"
		switch i {
		case 0:
			anchor = "start"
		case otTimeLabels - 1:
			anchor = "end"
		}
		c.Ticks = append(c.Ticks, otTick{X: x(t), Y: c.TimeY, Label: t.UTC().Format(layout), Anchor: anchor})
	}
	for _, p := range []float64{0, 0.5, 1} {
		c.YTicks = append(c.YTicks, otTick{X: otLeft, Y: otTop + otPlot*(1-p), Label: fmt.Sprintf("%d%%", int(100*p))})
	}
	for _, name := range order {
		c.Legend = append(c.Legend, segment{Name: name, Color: colour[name]})
	}
	return c
}
