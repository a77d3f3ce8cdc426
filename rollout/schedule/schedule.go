// Package schedule describes the scheduled changes of rollout.
//
// A Schedule holds one change of a feature, as the body of the route that
// makes it (PATCH /api/features/K, PUT …/rules, PUT …/buckets), to apply
// at a set time: "switch the banner off Friday 18:00". The body is parsed
// by that route's own parser (a rollout.ScheduleParser, which package api
// provides) when the schedule is made, to refuse what the route refuses
// and to preview it, and again when it is due, so that a schedule means
// exactly what the route means.
//
// At its time the schedule is previewed again on the feature as it is then
// and applied as actor Actor, or marked failed with the reason: the change
// no longer applies (the feature moved on in a way it cannot follow, a
// validation), it would move more than its max_churn, or the settings now
// refuse its author's change (see below). Either way an audit event
// records it: the version's (audit.ScheduleApply) or audit.ScheduleFail.
//
// Schedules are stored. The runner (rollout.Service.RunSchedules, or
// ApplyDueSchedules called by hand) claims the due ones in the store,
// atomically (pending → running, with a claim of its own), so that of
// several instances on one database exactly one gets each; it writes the
// feature's version and the schedule's end in one transaction conditional
// on its claim (rollout.ScheduleStore.FinishSchedule). A claimant that
// dies before it finishes wrote nothing: after Lease another instance
// claims the schedule again. A schedule due while no instance ran applies
// at the next start, however late, with the delay recorded
// (Schedule.Delay).
//
// An editor's schedule is bound by the settings as the editor's change is:
// at creation its preview must be a change the editor could make now (a
// change needing an approval or an admin is refused, 403), and at its time
// it applies with the editor's role, so the editors' churn limit and
// approvals apply as they are then. A schedule whose change would then
// need an approval fails with that reason: it opens no change request,
// since an approval given later would apply the change at another time
// than the one scheduled.
//
// Archiving a feature cancels its pending schedules (in every
// environment), in the archive's transaction; purging it removes them.
//
// The package is this file: what a schedule is (Schedule, its Status, the
// Change it holds), what asks for one (Spec) and selects some (Query),
// their limits, and the audit event of each (Event). Package rollout keeps
// them (rollout.ScheduleStore) and applies them
// (rollout.Service.CreateSchedule, ApplyDueSchedules), as the change
// pipeline applies any change.
package schedule

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/feature"
)

// Actor is the actor of the versions schedules make.
const Actor = "schedule"

// Status is where a schedule stands.
type Status string

// The statuses of a schedule: pending until its time, running while an
// instance applies it, then applied or failed; canceled by hand (or by an
// archive) while pending.
const (
	Pending  Status = "pending"
	Running  Status = "running"
	Applied  Status = "applied"
	Failed   Status = "failed"
	Canceled Status = "canceled"
)

// Statuses are the statuses of schedules.
var Statuses = []Status{Pending, Running, Applied, Failed, Canceled}

// The kinds of scheduled changes: the route whose body each holds.
const (
	KindPatch   = "patch"   // PATCH /api/features/K
	KindRules   = "rules"   // PUT /api/features/K/rules
	KindBuckets = "buckets" // PUT /api/features/K/buckets
)

// Kinds are the kinds of scheduled changes.
var Kinds = []string{KindPatch, KindRules, KindBuckets}

// Limits of schedules.
const (
	// MaxAhead is how far ahead a schedule may be set.
	MaxAhead = 366 * 24 * time.Hour
	// MaxPendingPerFeature and MaxPendingPerEnvironment bound the pending
	// schedules of one feature and of one environment.
	MaxPendingPerFeature     = 100
	MaxPendingPerEnvironment = 1000
	// MaxBody bounds the bytes of a scheduled change's body.
	MaxBody = 64 << 10
	// DefaultPage and MaxPage are how many schedules a
	// list returns by default and at most.
	DefaultPage = 100
	MaxPage     = 1000
	// Lease is how long a claim holds a running schedule: one
	// still running after it (its claimant died) is claimed again.
	Lease = 5 * time.Minute
)

// Change is the change a schedule makes: the kind of route and
// its body, as that route takes it (without its guards: the schedule's
// max_churn and comment stand beside it).
type Change struct {
	Kind string          `json:"kind"`
	Body json.RawMessage `json:"body"`
}

// Schedule is a change of a feature scheduled for a set time.
type Schedule struct {
	ID          string    `json:"id"`
	Feature     string    `json:"feature"`    // the feature's key
	FeatureID   string    `json:"feature_id"` // a feature made again under the key is another
	Environment string    `json:"environment"`
	At          time.Time `json:"at"`
	Change      Change    `json:"change"`
	// Summary says what the change does, in words.
	Summary string `json:"summary"`
	// MaxChurn, when not nil, fails the schedule instead of applying a
	// change that would move more than this fraction of users.
	MaxChurn *float64 `json:"max_churn,omitempty"`
	Comment  string   `json:"comment,omitempty"`
	// Actor made the schedule, with a token of Role ("" for the command
	// line or an open API): an editor's is bound by the settings.
	Actor     string    `json:"actor"`
	Role      auth.Role `json:"role,omitempty"`
	Status    Status    `json:"status"`
	CreatedAt time.Time `json:"created_at"`
	// BaseVersion is the feature's version the schedule was previewed at
	// when made, and Preview that preview.
	BaseVersion int            `json:"base_version"`
	Preview     feature.Report `json:"preview"`
	// Reason says why it failed or was canceled.
	Reason string `json:"reason,omitempty"`
	// DoneAt is when it applied, failed or was canceled, and DoneBy who
	// canceled it.
	DoneAt *time.Time `json:"done_at,omitempty"`
	DoneBy string     `json:"done_by,omitempty"`
	// Delay is how long after At it applied or failed (its runner was
	// down, say), rounded to the second: "0s" on time.
	Delay string `json:"delay,omitempty"`
	// Version is the feature's version it made, and Report what that
	// change did to users.
	Version int             `json:"version,omitempty"`
	Report  *feature.Report `json:"report,omitempty"`
	// Claim names the instance's claim on a running schedule; the store
	// sets it when the schedule is claimed.
	Claim string `json:"-"`
}

// Pending reports whether s has yet to apply.
func (s Schedule) Pending() bool { return s.Status == Pending }

// Query selects schedules (rollout.ScheduleStore.Schedules).
type Query struct {
	Feature string // "" for every feature
	Status  Status // "" for any
	Limit   int    // at most this many; all when <= 0
}

// Spec is what a schedule asks for.
type Spec struct {
	At       time.Time
	Change   Change
	MaxChurn *float64
	Comment  string
	// Role is the role of the token that makes it (see
	// rollout.ChangeOptions.Role).
	Role auth.Role
}

// Validate reports what is wrong with sp at time now, before its body is
// parsed: a kind of change that is none of Kinds, a body over MaxBody, a
// time not after now or more than MaxAhead ahead, a max_churn outside 0..1.
func (sp Spec) Validate(now time.Time) error {
	switch {
	case !slices.Contains(Kinds, sp.Change.Kind):
		return &feature.Error{Code: feature.EInvalid, Field: "change.kind", Message: fmt.Sprintf("change.kind %q: schedule a patch (the body of PATCH /api/features/K), rules (of PUT …/rules) or buckets (of PUT …/buckets)", sp.Change.Kind)}
	case len(sp.Change.Body) > MaxBody:
		return &feature.Error{Code: feature.EInvalid, Field: "change.body", Message: fmt.Sprintf("change.body is %d bytes: keep it to %d", len(sp.Change.Body), MaxBody)}
	case !sp.At.After(now):
		return &feature.Error{Code: feature.EInvalid, Field: "at", Message: fmt.Sprintf("at %s is not in the future (it is now %s): schedule a change for a later time, or make it now", sp.At.UTC().Format(time.RFC3339), now.Format(time.RFC3339))}
	case sp.At.Sub(now) > MaxAhead:
		return &feature.Error{Code: feature.EInvalid, Field: "at", Message: fmt.Sprintf("at %s is more than a year (%d days) ahead: schedule it closer", sp.At.UTC().Format(time.RFC3339), MaxAhead/(24*time.Hour))}
	}
	if sp.MaxChurn != nil {
		if err := feature.CheckMaxChurn(*sp.MaxChurn); err != nil {
			return err
		}
	}
	return nil
}

// Event returns the audit event that records what happened to
// the schedule s: its creation (audit.ScheduleCreate), failure
// (audit.ScheduleFail) or cancellation (audit.ScheduleCancel). An applied
// schedule's event is its version's (audit.ScheduleApply).
func Event(s Schedule, kind audit.Kind) audit.Event {
	e := audit.Event{Kind: kind, Feature: s.Feature, FeatureID: s.FeatureID, Subject: s.ID, Comment: s.Comment}
	at := s.At.UTC().Format(time.RFC3339)
	switch kind {
	case audit.ScheduleCreate:
		e.Time, e.Actor = s.CreatedAt, s.Actor
		e.Summary = audit.JoinSummary(fmt.Sprintf("scheduled for %s: %s", at, s.Summary), audit.PreviewSummary(s.Preview))
		churn := s.Preview.Churn
		e.Churn = &churn
	case audit.ScheduleFail:
		e.Actor = Actor
		e.Summary = fmt.Sprintf("the change %s scheduled for %s (%s) failed: %s", s.Actor, at, s.Summary, s.Reason)
	default:
		e.Actor = s.DoneBy
		e.Summary = fmt.Sprintf("canceled the change %s scheduled for %s (%s)", s.Actor, at, s.Summary)
		if s.Reason != "" {
			e.Summary += ": " + s.Reason
		}
	}
	if s.DoneAt != nil && kind != audit.ScheduleCreate {
		e.Time = *s.DoneAt
	}
	return e
}
