package ramp

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/plan"
)

// A stored ramp (Ramp), what a ramp does on its own (Actor, ActorFor), and
// the audit events that record its start and updates (CreateEvent, Event).

// Actor is the actor of the versions ramps make.
const Actor = "ramp"

// Ramp is a scheduled ramp of one bucket of a feature.
type Ramp struct {
	ID        string `json:"id"`
	Feature   string `json:"feature"`    // the feature's key
	FeatureID string `json:"feature_id"` // the feature's ID: a feature made again under the key is another
	Bucket    string `json:"bucket"`
	Steps     []Step `json:"steps"`
	// MaxChurn, when not nil, pauses the ramp instead of applying a step
	// that would move more than this fraction of users.
	MaxChurn  *float64 `json:"max_churn"`
	Tolerance float64  `json:"tolerance"`
	// FineDefault says the tolerance is the default of a fine ring
	// (plan.FineTolerance, chosen because none was given): a step that cannot
	// come within it comes within plan.DefaultTolerance instead of pausing.
	FineDefault bool  `json:"fine_default,omitempty"`
	State       State `json:"state"`
	// Comment is what its author said of the ramp (at most rollout.MaxComment
	// bytes); its steps' versions carry it.
	Comment string `json:"comment,omitempty"`
	// Reason says why the ramp is paused (or was, before it resumed).
	Reason string `json:"reason,omitempty"`
	// Next is the index of the next step to apply; len(Steps) when done.
	Next int `json:"next"`
	// Replicas is the bucket's replica count after the ramp's last step
	// (at creation, the count then): a feature whose bucket has fewer has
	// been changed by hand in a way the ramp cannot continue from.
	Replicas  int       `json:"replicas"`
	Actor     string    `json:"actor"`
	Revision  int       `json:"revision"` // grows by one with each update of the ramp
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// UpdatedBy is who made the last update by hand (pause, resume,
	// cancel); "" when the ramp made it itself (a step). The store's
	// audit event of the update names them.
	UpdatedBy string `json:"updated_by,omitempty"`
	// Role is the role of the token that started the ramp ("" for the
	// command line, an open API, or a ramp older than roles on ramps).
	// An editor's ramp is bound by the settings at each step, unless
	// ApprovedBy approved it: a step moves at most the editors' churn
	// limit, and none applies while approvals cover the feature.
	Role auth.Role `json:"role,omitempty"`
	// ApprovedBy is who approved the ramp's steps: the approver of the
	// change request that started it, or who resumed it after it paused
	// for an approval.
	ApprovedBy string `json:"approved_by,omitempty"`
	// NeedsApproval says the ramp paused because approvals came to cover
	// its feature after an editor started it: resuming it, by another
	// person than its author, approves its steps.
	NeedsApproval bool `json:"needs_approval,omitempty"`
}

// Live reports whether the ramp may still apply steps (active or paused).
func (r Ramp) Live() bool { return r.State == Active || r.State == Paused }

// Clone returns a deep copy of r.
func (r Ramp) Clone() Ramp {
	r.Steps = slices.Clone(r.Steps)
	for i, st := range r.Steps {
		if st.Applied != nil {
			at := *st.Applied
			r.Steps[i].Applied = &at
		}
	}
	if r.MaxChurn != nil {
		m := *r.MaxChurn
		r.MaxChurn = &m
	}
	return r
}

// ReplicasFor is Replicas at r's tolerance; a ramp at the fine
// default that cannot come within it comes within plan.DefaultTolerance.
func (r Ramp) ReplicasFor(f feature.Feature, share float64, down bool) (int, float64, error) {
	n, reached, err := Replicas(f, r.Bucket, share, r.Tolerance, down)
	if err != nil && r.FineDefault {
		return Replicas(f, r.Bucket, share, plan.DefaultTolerance, down)
	}
	return n, reached, err
}

// Down reports whether r ramps its bucket down, when the bucket has share
// now: its steps decrease, or its one step is below share.
func (r Ramp) Down(share float64) bool {
	if len(r.Steps) > 1 {
		return r.Steps[1].Share < r.Steps[0].Share
	}
	return len(r.Steps) == 1 && r.Steps[0].Share < share
}

// ActorFor is the actor of what a ramp does on its own (its steps, a
// pause by a step that could not apply): "ramp, started by alice".
func ActorFor(r Ramp) string {
	if r.Actor == "" || r.Actor == "anonymous" || r.Actor == Actor {
		return Actor
	}
	return Actor + ", started by " + r.Actor
}

// Event returns the audit event that records the ramp update from
// prev to next (prev.ID == next.ID), and false when the update is none of
// an audited kind. by is who made it ("": the ramp itself).
func Event(prev, next Ramp, by string, at time.Time) (audit.Event, bool) {
	e := audit.Event{Time: at, Actor: by, Feature: next.Feature, FeatureID: next.FeatureID, Subject: next.ID}
	if e.Actor == "" {
		e.Actor = ActorFor(next)
	}
	what := fmt.Sprintf("ramp of %s to %s", next.Bucket, feature.Percent(next.Steps[len(next.Steps)-1].Share))
	switch {
	case next.State == Canceled && prev.State != Canceled:
		e.Kind, e.Summary = audit.RampCancel, "canceled the "+what+fmt.Sprintf(" after %d of %d steps", next.Next, len(next.Steps))
	case next.State == Paused && prev.State != Paused:
		e.Kind, e.Summary = audit.RampPause, "paused the "+what+reason(next.Reason)
	case next.State == Active && prev.State == Paused && next.ApprovedBy != prev.ApprovedBy:
		e.Kind, e.Summary = audit.RampResume, "resumed the "+what+", approving its steps (approvals cover the feature)"
	case next.State == Active && prev.State == Paused:
		e.Kind, e.Summary = audit.RampResume, "resumed the "+what
	case next.Next > prev.Next:
		i := next.Next - 1
		e.Kind, e.Summary = audit.RampStep, fmt.Sprintf("%s: step %d of %d, %s (the bucket had it already: nothing changed)", what, i+1, len(next.Steps), feature.Percent(next.Steps[i].Share))
	default:
		return audit.Event{}, false
	}
	return e, true
}

func reason(r string) string {
	if r == "" {
		return ""
	}
	return " (" + r + ")"
}

// CreateEvent returns the audit event that records the start of r.
func CreateEvent(r Ramp) audit.Event {
	shares := make([]string, len(r.Steps))
	for i, st := range r.Steps {
		shares[i] = feature.Percent(st.Share)
	}
	return audit.Event{
		Time: r.CreatedAt, Actor: r.Actor, Kind: audit.RampCreate, Feature: r.Feature, FeatureID: r.FeatureID, Subject: r.ID,
		Summary: fmt.Sprintf("started a ramp of %s: %s, first step at %s", r.Bucket, strings.Join(shares, " → "), r.Steps[0].At.UTC().Format(time.RFC3339)),
		Comment: r.Comment,
	}
}
