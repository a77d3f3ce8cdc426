package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/feature"
)

// Scheduled changes. A Schedule holds one change of a feature, as the body
// of the route that makes it (PATCH /api/features/K, PUT …/rules, PUT
// …/buckets), to apply at a set time: "switch the banner off Friday
// 18:00". The body is parsed by that route's own parser (a ScheduleParser,
// which package api provides) when the schedule is made, to refuse what
// the route refuses and to preview it, and again when it is due, so that
// a schedule means exactly what the route means.
//
// At its time the schedule is previewed again on the feature as it is
// then and applied as actor ScheduleActor, or marked failed with the
// reason: the change no longer applies (the feature moved on in a way it
// cannot follow, a validation), it would move more than its max_churn, or
// the settings now refuse its author's change (see below). Either way an
// audit event records it: the version's (audit.ScheduleApply) or
// audit.ScheduleFail.
//
// Schedules are stored. The runner (RunSchedules, or ApplyDueSchedules
// called by hand) claims the due ones in the store, atomically (pending →
// running, with a claim of its own), so that of several instances on one
// database exactly one gets each; it writes the feature's version and the
// schedule's end in one transaction conditional on its claim
// (ScheduleStore.FinishSchedule). A claimant that dies before it finishes
// wrote nothing: after ScheduleLease another instance claims the schedule
// again. A schedule due while no instance ran applies at the next start,
// however late, with the delay recorded (Schedule.Delay).
//
// An editor's schedule is bound by the settings as the editor's change
// is: at creation its preview must be a change the editor could make now
// (a change needing an approval or an admin is refused, 403), and at its
// time it applies with the editor's role, so the editors' churn limit and
// approvals apply as they are then. A schedule whose change would then
// need an approval fails with that reason: it opens no change request,
// since an approval given later would apply the change at another time
// than the one scheduled.
//
// Archiving a feature cancels its pending schedules (in every
// environment), in the archive's transaction; purging it removes them.

// ScheduleActor is the actor of the versions schedules make.
const ScheduleActor = "schedule"

// ScheduleStatus is where a schedule stands.
type ScheduleStatus string

// The statuses of a schedule: pending until its time, running while an
// instance applies it, then applied or failed; canceled by hand (or by an
// archive) while pending.
const (
	SchedulePending  ScheduleStatus = "pending"
	ScheduleRunning  ScheduleStatus = "running"
	ScheduleApplied  ScheduleStatus = "applied"
	ScheduleFailed   ScheduleStatus = "failed"
	ScheduleCanceled ScheduleStatus = "canceled"
)

// ScheduleStatuses are the statuses of schedules.
var ScheduleStatuses = []ScheduleStatus{SchedulePending, ScheduleRunning, ScheduleApplied, ScheduleFailed, ScheduleCanceled}

// The kinds of scheduled changes: the route whose body each holds.
const (
	ScheduleKindPatch   = "patch"   // PATCH /api/features/K
	ScheduleKindRules   = "rules"   // PUT /api/features/K/rules
	ScheduleKindBuckets = "buckets" // PUT /api/features/K/buckets
)

// ScheduleKinds are the kinds of scheduled changes.
var ScheduleKinds = []string{ScheduleKindPatch, ScheduleKindRules, ScheduleKindBuckets}

// Limits of schedules.
const (
	// MaxScheduleAhead is how far ahead a schedule may be set.
	MaxScheduleAhead = 366 * 24 * time.Hour
	// MaxPendingPerFeature and MaxPendingPerEnvironment bound the pending
	// schedules of one feature and of one environment.
	MaxPendingPerFeature     = 100
	MaxPendingPerEnvironment = 1000
	// MaxScheduleBody bounds the bytes of a scheduled change's body.
	MaxScheduleBody = 64 << 10
	// DefaultSchedulePage and MaxSchedulePage are how many schedules a
	// list returns by default and at most.
	DefaultSchedulePage = 100
	MaxSchedulePage     = 1000
	// ScheduleLease is how long a claim holds a running schedule: one
	// still running after it (its claimant died) is claimed again.
	ScheduleLease = 5 * time.Minute
	// scheduleBatch is how many due schedules one claim takes.
	scheduleBatch = 50
)

// ScheduledChange is the change a schedule makes: the kind of route and
// its body, as that route takes it (without its guards: the schedule's
// max_churn and comment stand beside it).
type ScheduledChange struct {
	Kind string          `json:"kind"`
	Body json.RawMessage `json:"body"`
}

// ScheduleParser makes the Change a scheduled change's body asks for, as
// the route of its kind parses and checks that body; errors are the
// route's own (feature.Error).
type ScheduleParser func(kind string, body json.RawMessage) (Change, error)

// Schedule is a change of a feature scheduled for a set time.
type Schedule struct {
	ID          string          `json:"id"`
	Feature     string          `json:"feature"`    // the feature's key
	FeatureID   string          `json:"feature_id"` // a feature made again under the key is another
	Environment string          `json:"environment"`
	At          time.Time       `json:"at"`
	Change      ScheduledChange `json:"change"`
	// Summary says what the change does, in words.
	Summary string `json:"summary"`
	// MaxChurn, when not nil, fails the schedule instead of applying a
	// change that would move more than this fraction of users.
	MaxChurn *float64 `json:"max_churn,omitempty"`
	Comment  string   `json:"comment,omitempty"`
	// Actor made the schedule, with a token of Role ("" for the command
	// line or an open API): an editor's is bound by the settings.
	Actor     string         `json:"actor"`
	Role      auth.Role      `json:"role,omitempty"`
	Status    ScheduleStatus `json:"status"`
	CreatedAt time.Time      `json:"created_at"`
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
func (s Schedule) Pending() bool { return s.Status == SchedulePending }

// ScheduleQuery selects schedules (ScheduleStore.Schedules).
type ScheduleQuery struct {
	Feature string         // "" for every feature
	Status  ScheduleStatus // "" for any
	Limit   int            // at most this many; all when <= 0
}

// ScheduleStore keeps schedules, each in its environment. Each method is
// atomic.
type ScheduleStore interface {
	// CreateSchedule stores the pending schedule s and records
	// schedule_create; EConflict when its feature has
	// MaxPendingPerFeature pending schedules already, or the environment
	// MaxPendingPerEnvironment.
	CreateSchedule(ctx context.Context, s Schedule) error
	// Schedule returns one schedule; ENotFound if none has that ID.
	Schedule(ctx context.Context, id string) (Schedule, error)
	// Schedules returns the schedules q selects: the pending and running
	// ones soonest first, then the others latest first.
	Schedules(ctx context.Context, q ScheduleQuery) ([]Schedule, error)
	// CancelSchedule marks the pending schedule id of feature key
	// canceled by by at at, with reason, and records schedule_cancel;
	// it returns the schedule so marked. ENotFound when the feature has no
	// schedule id, EConflict when it is not pending.
	CancelSchedule(ctx context.Context, key, id, by, reason string, at time.Time) (Schedule, error)
	// ClaimDueSchedules marks running, under claim, at most limit
	// schedules that are pending and due at now, or running under a
	// claim made before now-ScheduleLease, and returns them (Claim set).
	// Of several callers, each schedule goes to one.
	ClaimDueSchedules(ctx context.Context, claim string, now time.Time, limit int) ([]Schedule, error)
	// FinishSchedule stores s, which ends the running schedule s.ID
	// claimed under s.Claim (applied or failed), and, when f is not nil,
	// writes f and its version v as UpdateFeature does, in one
	// transaction; a failed one records schedule_fail (an applied one's
	// event is its version's). EConflict when the schedule is no longer
	// running under s.Claim, or the feature moved on.
	FinishSchedule(ctx context.Context, s Schedule, f *feature.Feature, v *Version) error
}

// ScheduleSpec is what a schedule asks for.
type ScheduleSpec struct {
	At       time.Time
	Change   ScheduledChange
	MaxChurn *float64
	Comment  string
	// Role is the role of the token that makes it (see ChangeOptions.Role).
	Role auth.Role
}

// CreateSchedule stores a pending schedule of the change sp describes,
// for the feature key, made by actorName, and returns it with its
// preview: the report of a dry run of the change now. parse makes the
// change of sp's body. It refuses (and stores nothing) a time in the past
// or more than MaxScheduleAhead ahead, a body the route refuses, a change
// the feature refuses now or that moves more than its max_churn, and an
// editor's change the settings would not let the editor make now.
func (s *Service) CreateSchedule(ctx context.Context, key string, sp ScheduleSpec, parse ScheduleParser, actorName string) (Schedule, error) {
	now := s.now().UTC()
	switch {
	case !slices.Contains(ScheduleKinds, sp.Change.Kind):
		return Schedule{}, &feature.Error{Code: feature.EInvalid, Field: "change.kind", Message: fmt.Sprintf("change.kind %q: schedule a patch (the body of PATCH /api/features/K), rules (of PUT …/rules) or buckets (of PUT …/buckets)", sp.Change.Kind)}
	case len(sp.Change.Body) > MaxScheduleBody:
		return Schedule{}, &feature.Error{Code: feature.EInvalid, Field: "change.body", Message: fmt.Sprintf("change.body is %d bytes: keep it to %d", len(sp.Change.Body), MaxScheduleBody)}
	case !sp.At.After(now):
		return Schedule{}, &feature.Error{Code: feature.EInvalid, Field: "at", Message: fmt.Sprintf("at %s is not in the future (it is now %s): schedule a change for a later time, or make it now", sp.At.UTC().Format(time.RFC3339), now.Format(time.RFC3339))}
	case sp.At.Sub(now) > MaxScheduleAhead:
		return Schedule{}, &feature.Error{Code: feature.EInvalid, Field: "at", Message: fmt.Sprintf("at %s is more than a year (%d days) ahead: schedule it closer", sp.At.UTC().Format(time.RFC3339), MaxScheduleAhead/(24*time.Hour))}
	}
	if sp.MaxChurn != nil {
		if err := feature.CheckMaxChurn(*sp.MaxChurn); err != nil {
			return Schedule{}, err
		}
	}
	if err := s.checkComment(sp.Comment, false); err != nil {
		return Schedule{}, err
	}
	ch, err := parse(sp.Change.Kind, sp.Change.Body)
	if err != nil {
		return Schedule{}, err
	}
	res, err := s.Change(ctx, key, ch, ChangeOptions{DryRun: true, Actor: actorName, MaxChurn: sp.MaxChurn, Comment: sp.Comment, Role: sp.Role})
	if err != nil {
		return Schedule{}, err
	}
	switch res.Needs {
	case "approval":
		return Schedule{}, feature.Errorf(feature.EForbidden, "approvals cover feature %q, where an editor's change is a change request: a schedule cannot wait for an approval; submit the change when it is due, or ask an admin to schedule it", key)
	case "admin":
		return Schedule{}, feature.Errorf(feature.EForbidden, "the settings would refuse this change of feature %q by an editor now (it would move %s of users, or it is a reshuffle): ask an admin to schedule it", key, feature.Percent(res.Report.Churn))
	}
	sc := Schedule{
		ID: uuid.NewString(), Feature: key, FeatureID: res.Feature.ID, Environment: s.env,
		At: sp.At.UTC(), Change: ScheduledChange{Kind: sp.Change.Kind, Body: feature.CompactJSON(sp.Change.Body)},
		Summary: ch.Summary(), MaxChurn: sp.MaxChurn, Comment: sp.Comment,
		Actor: actor(ChangeOptions{Actor: actorName}), Role: sp.Role, Status: SchedulePending, CreatedAt: now,
		BaseVersion: res.Feature.Version - 1, Preview: res.Report,
	}
	if err := s.store.CreateSchedule(ctx, sc); err != nil {
		return Schedule{}, err
	}
	return sc, nil
}

// Schedules returns the schedules q selects (DefaultSchedulePage of them
// when q.Limit is 0): pending and running soonest first, then the others
// latest first. EInvalid for a bad query.
func (s *Service) Schedules(ctx context.Context, q ScheduleQuery) ([]Schedule, error) {
	if q.Limit == 0 {
		q.Limit = DefaultSchedulePage
	}
	switch {
	case q.Limit < 0 || q.Limit > MaxSchedulePage:
		return nil, feature.Errorf(feature.EInvalid, "list at most %d schedules at a time: got limit %d", MaxSchedulePage, q.Limit)
	case q.Status != "" && !slices.Contains(ScheduleStatuses, q.Status):
		return nil, feature.Errorf(feature.EInvalid, "status %q: use pending, running, applied, failed or canceled", q.Status)
	}
	return s.store.Schedules(ctx, q)
}

// CancelSchedule cancels the pending schedule id of the feature key, by
// actorName. ENotFound when the feature has no such schedule, EConflict
// when it is no longer pending.
func (s *Service) CancelSchedule(ctx context.Context, key, id, actorName string) (Schedule, error) {
	return s.store.CancelSchedule(ctx, key, id, actor(ChangeOptions{Actor: actorName}), "canceled by hand", s.now().UTC())
}

// DefaultScheduleInterval is how often RunSchedules looks for due
// schedules when given no interval.
const DefaultScheduleInterval = 10 * time.Second

// RunSchedules applies the due schedules (ApplyDueSchedules) at once and
// then at every interval (0: DefaultScheduleInterval) until ctx is done.
// Every instance may run it: each schedule applies once whichever
// instances run it. Failures go to report (nil drops them).
func (s *Service) RunSchedules(ctx context.Context, interval time.Duration, parse ScheduleParser, report func(error)) {
	if interval <= 0 {
		interval = DefaultScheduleInterval
	}
	every(ctx, interval, true, func(ctx context.Context) error {
		_, err := s.ApplyDueSchedules(ctx, parse)
		return err
	}, report)
}

// ApplyDueSchedules claims the schedules that are due and applies each,
// or marks it failed with the reason; parse makes their changes. It
// returns how many it applied. A schedule another instance claimed is
// left to it.
func (s *Service) ApplyDueSchedules(ctx context.Context, parse ScheduleParser) (int, error) {
	claim := uuid.NewString()
	applied := 0
	var errs []error
	for {
		due, err := s.store.ClaimDueSchedules(ctx, claim, s.now().UTC(), scheduleBatch)
		if err != nil {
			return applied, errors.Join(append(errs, fmt.Errorf("claim due schedules: %w", err))...)
		}
		for _, sc := range due {
			did, err := s.runSchedule(ctx, sc, parse)
			if err != nil {
				errs = append(errs, fmt.Errorf("schedule %s of feature %q: %w", sc.ID, sc.Feature, err))
			}
			if did {
				applied++
			}
		}
		if len(due) < scheduleBatch || ctx.Err() != nil {
			return applied, errors.Join(errs...)
		}
	}
}

// maxScheduleConflicts is how many times runSchedule previews a schedule
// again after other writes of its feature came between its read and its
// write.
const maxScheduleConflicts = 5

// runSchedule applies the claimed schedule sc, or marks it failed, and
// reports whether it applied. An error leaves it running: once its claim
// lapses (ScheduleLease), it is claimed again.
func (s *Service) runSchedule(ctx context.Context, sc Schedule, parse ScheduleParser) (bool, error) {
	for attempt := 1; ; attempt++ {
		applied, err := s.trySchedule(ctx, sc, parse)
		if feature.ErrorCode(err) != feature.EConflict || attempt == maxScheduleConflicts {
			return applied, err
		}
		// The feature moved on (another instance's write), or the claim
		// was lost: read the schedule again.
		cur, rerr := s.store.Schedule(ctx, sc.ID)
		if rerr != nil {
			return false, errors.Join(err, rerr)
		}
		if cur.Status != ScheduleRunning || cur.Claim != sc.Claim {
			return false, nil // another instance claimed or finished it
		}
	}
}

// trySchedule is one attempt of runSchedule.
func (s *Service) trySchedule(ctx context.Context, sc Schedule, parse ScheduleParser) (bool, error) {
	opts := ChangeOptions{Actor: ScheduleActor, MaxChurn: sc.MaxChurn, Comment: sc.Comment, Role: sc.Role}
	g, err := s.gateFor(ctx, opts)
	if err != nil {
		return false, err
	}
	if err := s.mu.lock(ctx); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	now := s.now().UTC()
	done := sc
	done.DoneAt = &now
	done.Delay = max(now.Sub(sc.At), 0).Round(time.Second).String()
	fail := func(format string, args ...any) (bool, error) {
		done.Status, done.Reason = ScheduleFailed, fmt.Sprintf(format, args...)
		return false, s.store.FinishSchedule(ctx, done, nil, nil)
	}
	cur, err := s.reload(ctx, sc.Feature)
	if err != nil {
		return false, err
	}
	if cur == nil || cur.Feature().ID != sc.FeatureID {
		return fail("feature %q was archived or deleted since the change was scheduled", sc.Feature)
	}
	if g.covers(sc.Feature) {
		return fail("needs approval: approvals now cover feature %q, and %s, an editor, scheduled the change; an editor's change there is a change request, which a schedule does not open: submit the change, or ask an admin to make it", sc.Feature, sc.Actor)
	}
	ch, err := parse(sc.Change.Kind, sc.Change.Body)
	if err != nil {
		return fail("the scheduled change is refused: %s", feature.ErrorMessage(err))
	}
	ch = Change{
		summary: audit.JoinSummary("scheduled by "+sc.Actor, ch.summary),
		kind:    audit.ScheduleApply,
		apply:   ch.apply,
		spec:    ch.spec,
	}
	opts.gate = g
	res, err := s.applyWith(ctx, cur, ch, opts, func(f feature.Feature, v Version) error {
		done.Status, done.Version = ScheduleApplied, f.Version
		rep := v.Report
		done.Report = &rep
		v.Subject = sc.ID
		return s.store.FinishSchedule(ctx, done, &f, &v)
	})
	code := feature.ErrorCode(err)
	switch {
	case err == nil:
		return true, nil
	case code == feature.EChurn:
		rep := res.Report
		if e, ok := errors.AsType[*feature.Error](err); ok && e.Report != nil {
			rep = *e.Report
		}
		limit := "its max_churn"
		if sc.MaxChurn != nil {
			limit = "its max_churn of " + feature.Percent(*sc.MaxChurn)
		}
		return fail("the change would move %s of users of feature %q (at version %d), more than %s: nothing was changed", feature.Percent(rep.Churn), sc.Feature, cur.Feature().Version, limit)
	case code == feature.EConflict && !isChangeError(err):
		return false, err // lost a race: runSchedule tries again
	case code == feature.EInvalid || code == feature.EForbidden || code == feature.ENotFound || code == feature.EConflict || isChangeError(err):
		return fail("feature %q at version %d (scheduled at version %d) refuses the change: %s", sc.Feature, cur.Feature().Version, sc.BaseVersion, feature.ErrorMessage(err))
	}
	return false, err
}

// ScheduleEvent returns the audit event that records what happened to
// the schedule s: its creation (audit.ScheduleCreate), failure
// (audit.ScheduleFail) or cancellation (audit.ScheduleCancel). An applied
// schedule's event is its version's (audit.ScheduleApply).
func ScheduleEvent(s Schedule, kind audit.Kind) audit.Event {
	e := audit.Event{Kind: kind, Feature: s.Feature, FeatureID: s.FeatureID, Subject: s.ID, Comment: s.Comment}
	at := s.At.UTC().Format(time.RFC3339)
	switch kind {
	case audit.ScheduleCreate:
		e.Time, e.Actor = s.CreatedAt, s.Actor
		e.Summary = audit.JoinSummary(fmt.Sprintf("scheduled for %s: %s", at, s.Summary), audit.PreviewSummary(s.Preview))
		churn := s.Preview.Churn
		e.Churn = &churn
	case audit.ScheduleFail:
		e.Actor = ScheduleActor
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
