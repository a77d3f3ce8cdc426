package web

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rollout/rollout/rollout/ramp"
)

// rampView is one of a feature's ramps on its page.
type rampView struct {
	ID        string
	Bucket    string
	State     ramp.State
	Live      bool   // active or paused: it can be paused, resumed or canceled
	Reason    string // why it is (or was) paused
	MaxChurn  *float64
	Actor     string
	CreatedAt time.Time
	Steps     []rampStepView
	Next      *rampStepView // the next step to apply; nil when none will
	Applied   int           // steps applied
}

// rampStepView is one step of a ramp's schedule.
type rampStepView struct {
	N       int // from 1
	Share   float64
	At      time.Time
	Applied *time.Time
	Version int     // the feature's version it made; 0: none needed
	Reached float64 // the exact share after it
	IsNext  bool
}

// rampViews lists a feature's ramps, newest first.
func rampViews(rs []ramp.Ramp) []rampView {
	views := make([]rampView, 0, len(rs))
	for _, r := range rs {
		v := rampView{
			ID: r.ID, Bucket: r.Bucket, State: r.State, Live: r.Live(), Reason: r.Reason,
			MaxChurn: r.MaxChurn, Actor: r.Actor, CreatedAt: r.CreatedAt,
		}
		for i, st := range r.Steps {
			sv := rampStepView{N: i + 1, Share: st.Share, At: st.At, Applied: st.Applied, Version: st.Version, Reached: st.Reached}
			if st.Applied != nil {
				v.Applied++
			}
			sv.IsNext = v.Live && i == r.Next
			v.Steps = append(v.Steps, sv)
		}
		if v.Live && r.Next < len(v.Steps) {
			next := v.Steps[r.Next]
			v.Next = &next
		}
		views = append(views, v)
	}
	slices.Reverse(views)
	return views
}

// stateLabel says a ramp's state in words.
func stateLabel(s ramp.State) string {
	switch s {
	case ramp.Active:
		return "Active"
	case ramp.Paused:
		return "Paused"
	case ramp.Canceled:
		return "Canceled"
	case ramp.Done:
		return "Done"
	}
	return string(s)
}

// until says how long from now until t, roughly: "in 3 h 20 min", or
// "due now" once it has come.
func until(t, now time.Time) string {
	d := t.Sub(now)
	if d <= 0 {
		return "due now"
	}
	d = d.Round(time.Minute)
	days, hours, mins := int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour), int(d%time.Hour/time.Minute)
	switch {
	case days > 0:
		s := "in " + strconv.Itoa(days) + " d"
		if hours > 0 {
			s += " " + strconv.Itoa(hours) + " h"
		}
		return s
	case hours > 0:
		s := "in " + strconv.Itoa(hours) + " h"
		if mins > 0 {
			s += " " + strconv.Itoa(mins) + " min"
		}
		return s
	case mins > 0:
		return "in " + strconv.Itoa(mins) + " min"
	}
	return "in less than a minute"
}

// rampReason says why a ramp stopped in the dashboard's words.
func rampReason(s string) string {
	return strings.ReplaceAll(s, "more than max_churn", "more than the ramp's churn limit of")
}
