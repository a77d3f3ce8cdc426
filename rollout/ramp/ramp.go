// Package ramp is what a scheduled ramp is and how its steps are
// reckoned, apart from the change pipeline that applies them (package
// rollout: Service.StartRamp, ApplyDueRamps). ramp.go: a ramp's Spec (its
// bucket, shares and times, in the API's JSON) and the Steps it makes,
// checked against the limits (MaxSteps, MaxHorizon); the States a ramp
// passes through; its default Tolerance (finer from FinePoints points);
// and Replicas, the replica count of a bucket whose exact share comes
// closest to a step's; and a StepPreview, what one step would do.
// stored.go: the Ramp as it is stored, with its steps, state and revision;
// the actor of what it does on its own (Actor, ActorFor); and the audit
// events of its start and updates (CreateEvent, Event). It imports
// neither HTTP nor SQL.
package ramp

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/plan"
)

// MaxSteps is the most steps one ramp may have.
const MaxSteps = 100

// MaxHorizon is how far from now a ramp's steps may be, ahead or
// behind: times beyond it are mistakes, and its bound keeps the steps'
// times within what every store and JSON can hold.
const MaxHorizon = 100 * 365 * 24 * time.Hour

// State is where a ramp stands.
type State string

// The states of a ramp. Active and paused ramps are live: a feature has at
// most one live ramp.
const (
	Active   State = "active"   // steps apply at their times
	Paused   State = "paused"   // by hand or by a step that could not apply; Reason says why
	Canceled State = "canceled" // by hand; no step applies again
	Done     State = "done"     // every step applied
)

// Step is one step of a ramp: the bucket's share from At on, and once
// applied what it did.
type Step struct {
	Share float64   `json:"share"`
	At    time.Time `json:"at"`
	// Applied is when the step was applied; nil until then.
	Applied *time.Time `json:"applied,omitempty"`
	// Version is the feature's version the step made; 0 when the bucket
	// already had the share and nothing needed to change.
	Version int `json:"version,omitempty"`
	// Replicas and Reached are the bucket's replicas and exact share after
	// the step.
	Replicas int     `json:"replicas,omitempty"`
	Reached  float64 `json:"reached,omitempty"`
}

// Spec is what a new ramp asks for: the bucket, its shares, and their
// times, either Every apart from Start (the first step at Start) or At,
// one time per share.
type Spec struct {
	Bucket    string
	Shares    []float64
	Every     time.Duration
	Start     time.Time // zero: now
	At        []time.Time
	MaxChurn  *float64
	Tolerance float64 // 0: the default (Tolerance); else as plan.CheckTolerance accepts
	Comment   string
	// Role is the role of the token starting the ramp: an editor's is
	// bound by the settings (Service.StartRamp of package rollout); "" and
	// admins' are not.
	Role auth.Role
}

// specJSON is a Spec as a ramp request keeps it (its comment is
// the request's, its role the author's).
type specJSON struct {
	Bucket    string      `json:"bucket"`
	Steps     []float64   `json:"steps"`
	Every     string      `json:"every,omitempty"`
	Start     *time.Time  `json:"start,omitempty"`
	At        []time.Time `json:"at,omitempty"`
	MaxChurn  *float64    `json:"max_churn,omitempty"`
	Tolerance float64     `json:"tolerance,omitempty"`
}

// MarshalJSON writes the spec as the API takes it: every as a duration
// ("1h0m0s"), start only when given (else the steps start when the ramp
// does).
func (sp Spec) MarshalJSON() ([]byte, error) {
	j := specJSON{Bucket: sp.Bucket, Steps: sp.Shares, At: sp.At, MaxChurn: sp.MaxChurn, Tolerance: sp.Tolerance}
	if sp.Every != 0 {
		j.Every = FormatEvery(sp.Every)
	}
	if !sp.Start.IsZero() {
		j.Start = &sp.Start
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (sp *Spec) UnmarshalJSON(data []byte) error {
	var j specJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*sp = Spec{Bucket: j.Bucket, Shares: j.Steps, At: j.At, MaxChurn: j.MaxChurn, Tolerance: j.Tolerance}
	if j.Every != "" {
		d, err := time.ParseDuration(j.Every)
		if err != nil {
			return fmt.Errorf("ramp every %q: %w", j.Every, err)
		}
		sp.Every = d
	}
	if j.Start != nil {
		sp.Start = *j.Start
	}
	return nil
}

// FinePoints is the size of ring (its points) from which a ramp given
// no tolerance defaults to plan.FineTolerance (0.05 points) rather than
// plan.DefaultTolerance (0.5 points): the points a fine plan gives a ring, where
// one replica moves about 0.025 points of users, so that the replica count
// nearest each step's share is within 0.05 points of it. Coarser rings keep
// the coarse default, which few replicas can meet.
const FinePoints = 4000

// Tolerance is the tolerance of a ramp of feature f given tol (0: none
// given), and whether it is the fine default: plan.FineTolerance when f has at
// least FinePoints points, else plan.DefaultTolerance.
func Tolerance(f feature.Feature, tol float64) (float64, bool, error) {
	if tol != 0 {
		return tol, false, plan.CheckTolerance(tol)
	}
	points := 0
	for _, b := range f.Buckets {
		points += b.Replicas
	}
	if points >= FinePoints {
		return plan.FineTolerance, true, nil
	}
	return plan.DefaultTolerance, false, nil
}

// Steps validates the spec and returns its steps, timed from now. Its
// Comment and Role are the caller's to check.
func (sp Spec) Steps(now time.Time) ([]Step, error) {
	n := len(sp.Shares)
	switch {
	case n == 0:
		return nil, feature.Errorf(feature.EInvalid, "a ramp needs at least one step: give steps, the bucket's shares in increasing (or decreasing) order, e.g. [0.05, 0.25, 1]")
	case n > MaxSteps:
		return nil, feature.Errorf(feature.EInvalid, "a ramp has at most %d steps, got %d", MaxSteps, n)
	}
	down := n > 1 && sp.Shares[1] < sp.Shares[0]
	for i, s := range sp.Shares {
		if math.IsNaN(s) || s < 0 || s > 1 || s == 0 && !down {
			return nil, feature.Errorf(feature.EInvalid, "step %d has share %v: each step's share must be above 0 and at most 1 (or 0, the last step of a ramp down)", i+1, s)
		}
		if i > 0 && !down && s <= sp.Shares[i-1] {
			return nil, feature.Errorf(feature.EInvalid, "step %d has share %v, not above step %d's %v: a ramp's shares must increase (or all decrease, for a ramp down)", i+1, s, i, sp.Shares[i-1])
		}
		if i > 0 && down && s >= sp.Shares[i-1] {
			return nil, feature.Errorf(feature.EInvalid, "step %d has share %v, not below step %d's %v: the shares of a ramp down must all decrease", i+1, s, i, sp.Shares[i-1])
		}
	}
	if sp.MaxChurn != nil {
		if err := feature.CheckMaxChurn(*sp.MaxChurn); err != nil {
			return nil, err
		}
	}
	if sp.Tolerance != 0 {
		if err := plan.CheckTolerance(sp.Tolerance); err != nil {
			return nil, err
		}
	}
	steps := make([]Step, n)
	switch {
	case len(sp.At) > 0 && (sp.Every != 0 || !sp.Start.IsZero()):
		return nil, feature.Errorf(feature.EInvalid, "give either the steps' times (at) or every (with an optional start), not both")
	case len(sp.At) > 0:
		if len(sp.At) != n {
			return nil, feature.Errorf(feature.EInvalid, "%d times (at) for %d steps: give one time per step", len(sp.At), n)
		}
		for i, at := range sp.At {
			if err := checkTime(fmt.Sprintf("step %d's time", i+1), at, now); err != nil {
				return nil, err
			}
			if i > 0 && !at.After(sp.At[i-1]) {
				return nil, feature.Errorf(feature.EInvalid, "step %d's time %s is not after step %d's %s: times must increase", i+1, at.UTC().Format(time.RFC3339), i, sp.At[i-1].UTC().Format(time.RFC3339))
			}
			steps[i] = Step{Share: sp.Shares[i], At: at.UTC()}
		}
	default:
		if sp.Every <= 0 && n > 1 {
			return nil, feature.Errorf(feature.EInvalid, "every must be a positive duration such as \"24h\", got %s", sp.Every)
		}
		// (n-1)·every within the horizon cannot overflow a Duration.
		if n > 1 && sp.Every > MaxHorizon/time.Duration(n-1) {
			return nil, feature.Errorf(feature.EInvalid, "every %s is too long: %d steps that far apart would take more than %d years", sp.Every, n, MaxHorizon/(365*24*time.Hour))
		}
		start := sp.Start
		if start.IsZero() {
			start = now
		}
		if err := checkTime("start", start, now); err != nil {
			return nil, err
		}
		if last := start.Add(time.Duration(n-1) * sp.Every); last.Sub(now) > MaxHorizon {
			return nil, feature.Errorf(feature.EInvalid, "the last step would be at %s, more than %d years from now: start earlier or step more often", last.UTC().Format(time.RFC3339), MaxHorizon/(365*24*time.Hour))
		}
		for i := range steps {
			steps[i] = Step{Share: sp.Shares[i], At: start.Add(time.Duration(i) * sp.Every).UTC()}
		}
	}
	return steps, nil
}

// checkTime refuses a step time (what names it) further than
// MaxHorizon from now.
func checkTime(what string, at, now time.Time) error {
	if d := at.Sub(now); d > MaxHorizon || d < -MaxHorizon {
		return feature.Errorf(feature.EInvalid, "%s %s is more than %d years from now", what, at.UTC().Format(time.RFC3339), MaxHorizon/(365*24*time.Hour))
	}
	return nil
}

// FormatEvery writes d as time.Duration does, without its zero minutes
// and seconds: "24h", "1h30m".
func FormatEvery(d time.Duration) string {
	out := d.String()
	if strings.HasSuffix(out, "m0s") {
		out = strings.TrimSuffix(out, "0s")
	}
	if strings.HasSuffix(out, "h0m") {
		out = strings.TrimSuffix(out, "0m")
	}
	return out
}

// Replicas returns the replicas of bucket whose exact share, the other
// buckets of f as they are, comes closest to target: the smallest count not
// below the bucket's current one (not above it, down) whose share reaches
// target, or the count just below it when that one's share falls short of
// target by less than the other passes it (and either is within tol). It
// returns EInvalid when no count within the feature's limits comes within
// tol of target.
func Replicas(f feature.Feature, bucket string, target, tol float64, down bool) (int, float64, error) {
	counts := make(map[string]int, len(f.Buckets))
	points := 0
	for _, b := range f.Buckets {
		counts[b.Name] = b.Replicas
		points += b.Replicas
	}
	lo := counts[bucket]
	hi := min(feature.MaxReplicas, feature.MaxPoints-(points-lo))
	if down {
		lo, hi = 0, lo
	}
	share := func(n int) float64 {
		counts[bucket] = n
		return plan.RingShares(counts)[bucket]
	}
	if s := share(lo); s >= target-shareSlack {
		return lo, s, nil
	}
	if s := share(hi); s < target-shareSlack {
		if target-s <= tol+shareSlack {
			return hi, s, nil
		}
		return 0, 0, feature.Errorf(feature.EInvalid, "bucket %q cannot reach %s: with the most replicas the feature's limits allow (%d) it has %s", bucket, feature.Percent(target), hi, feature.Percent(s))
	}
	// The bucket's share grows with its replicas: search for the smallest
	// count that reaches target.
	a, z := lo, hi // share(a) < target <= share(z)
	for z-a > 1 {
		m := (a + z) / 2
		if share(m) >= target-shareSlack {
			z = m
		} else {
			a = m
		}
	}
	over, under := share(z), share(a)
	if over-target <= tol+shareSlack && over-target <= target-under {
		return z, over, nil
	}
	if target-under <= tol+shareSlack || target-under < over-target {
		return a, under, nil
	}
	return z, over, nil
}

// shareSlack absorbs the rounding of shares to float64 when they are
// compared with a target and a tolerance.
const shareSlack = plan.ShareSlack

// StepPreview is one step of a ramp's preview (rollout.RampPreview): the
// share the bucket would reach (exactly) and the fraction of all users the
// step would move, with its report; Error says why the step could not
// apply (the ramp would pause there), and no later step is previewed.
type StepPreview struct {
	Share    float64   `json:"share"`
	At       time.Time `json:"at"`
	Replicas int       `json:"replicas"`
	Reached  float64   `json:"reached"`
	Churn    float64   `json:"churn"`
	Summary  string    `json:"summary"`
	Error    string    `json:"error,omitempty"`

	// Report is the step's, when it applies; it is not kept.
	Report feature.Report `json:"-"`
}
