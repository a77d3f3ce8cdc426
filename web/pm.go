package web

import (
	"context"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/feature/hll"
	"github.com/rollout/rollout/rollout/ramp"
	"github.com/rollout/rollout/rollout/settings"
)

// churnLimit is the share of users above which the dashboard escalates a
// change: the preview turns amber and applying it takes the feature's key
// typed. It is the environment's churn limit for editors (the setting
// max_churn) of svc, or its default when the settings cannot be read.
func churnLimit(ctx context.Context, svc *rollout.Service) float64 {
	s, err := svc.Settings(ctx)
	if err != nil || s.MaxChurn <= 0 {
		return settings.DefaultMaxChurn
	}
	return s.MaxChurn
}

// pmView is what the feature's header says in a product manager's words:
// its ramp, how many users it reaches a day, and the ring's details that
// stay under a disclosure.
type pmView struct {
	RampLabel, RampTitle string // the Ramping chip; "" when no ramp is live
	Daily                string // "≈ 12,400 users a day" (distinct users); "" with no evaluation in 24 h
	DailyTitle           string // how Daily is estimated
	Points               int    // the ring's points: every bucket's replicas
	RampBucket           string // the ramp form's default bucket: not the control
}

// newPMView fills the header's view of feature f, whose ramps (oldest
// first), evaluations of the last day (lastDay) and their distinct users
// (users, estimated; 0 when no app counted them) are given.
func newPMView(f feature.Feature, ramps []ramp.Ramp, lastDay, users int64, now time.Time) pmView {
	var v pmView
	for _, r := range ramps {
		if r.Live() {
			v.RampLabel, v.RampTitle = rampChip(r, now)
		}
	}
	switch {
	case users > 0:
		v.Daily = "≈ " + roughly(users) + " users a day"
		v.DailyTitle = "The distinct users apps were served in the last 24 hours, estimated within about " + pct(hll.RelativeError) +
			" (a sketch of their IDs), from " + thousands(int(min(lastDay, math.MaxInt32))) + " evaluations: a user evaluated more than once counts once."
	case lastDay > 0:
		v.Daily = "≈ " + roughly(lastDay) + " evaluations a day"
		v.DailyTitle = "The " + thousands(int(min(lastDay, math.MaxInt32))) + " evaluations apps counted in the last 24 hours: their apps' clients count no distinct users (update them), so a user evaluated more than once counts more than once."
	}
	for _, b := range f.Buckets {
		v.Points += b.Replicas
	}
	v.RampBucket = rampBucket(f)
	return v
}

// roughly rounds n to three significant figures, with thousands commas:
// 12,431 → "12,400".
func roughly(n int64) string {
	if n < 1000 {
		return strconv.FormatInt(n, 10)
	}
	p := int64(1)
	for n/p >= 1000 {
		p *= 10
	}
	r := (n + p/2) / p * p
	if r > math.MaxInt32 {
		return strconv.FormatInt(r, 10)
	}
	return thousands(int(r))
}

// controlName matches the names a control bucket usually has.
var controlName = regexp.MustCompile(`(?i)^(control|ctrl|off|false|disabled|default|baseline|old|legacy|holdout|none)$`)

// rampBucket is the bucket a ramp most likely grows: not the fallback nor
// one named like a control, and of those the one with the smallest share
// (below 100 %); the first bucket when every bucket is such a control.
func rampBucket(f feature.Feature) string {
	if len(f.Buckets) == 0 {
		return ""
	}
	shares := f.Ring().Shares()
	best, bestShare := "", 2.0
	for _, b := range f.Buckets {
		if b.Name == f.Fallback || controlName.MatchString(b.Name) || shares[b.Name] >= 1 {
			continue
		}
		if s := shares[b.Name]; s < bestShare {
			best, bestShare = b.Name, s
		}
	}
	if best == "" {
		for _, b := range f.Buckets {
			if b.Name != f.Fallback && shares[b.Name] < 1 {
				return b.Name
			}
		}
		return f.Buckets[0].Name
	}
	return best
}

// rollbackLabel says what rolling back to version v gives, in percentages:
// its shares, then what it changed ("off 93.07 %, on 6.93 % — changed the
// share of on").
func rollbackLabel(v rollout.Version) string {
	what, _, _ := strings.Cut(v.Summary, "; ")
	var shares []string
	for _, b := range v.Config.Buckets {
		if s, ok := v.Report.SharesAfter[b.Name]; ok {
			shares = append(shares, b.Name+" "+strings.TrimSuffix(pct(s), "%")+" %")
		}
	}
	if len(shares) == 0 {
		return what
	}
	if len(shares) > 6 {
		shares = append(shares[:6], "…")
	}
	return strings.Join(shares, ", ") + " — " + what
}
