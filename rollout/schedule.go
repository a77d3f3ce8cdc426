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
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/schedule"
)

// scheduleBatch is how many due schedules one claim takes.
const scheduleBatch = 50

// ScheduleParser makes the change.Change a scheduled change's body asks for, as
// the route of its kind parses and checks that body; errors are the
// route's own (feature.Error).
type ScheduleParser func(kind string, body json.RawMessage) (change.Change, error)

// ScheduleStore keeps schedules, each in its environment. Each method is
// atomic.
type ScheduleStore interface {
	// CreateSchedule stores the pending schedule s and records
	// schedule_create; EConflict when its feature has
	// schedule.MaxPendingPerFeature pending schedules already, or the
	// environment schedule.MaxPendingPerEnvironment.
	CreateSchedule(ctx context.Context, s schedule.Schedule) error
	// Schedule returns one schedule; ENotFound if none has that ID.
	Schedule(ctx context.Context, id string) (schedule.Schedule, error)
	// Schedules returns the schedules q selects: the pending and running
	// ones soonest first, then the others latest first.
	Schedules(ctx context.Context, q schedule.Query) ([]schedule.Schedule, error)
	// CancelSchedule marks the pending schedule id of feature key
	// canceled by by at at, with reason, and records schedule_cancel;
	// it returns the schedule so marked. ENotFound when the feature has no
	// schedule id, EConflict when it is not pending.
	CancelSchedule(ctx context.Context, key, id, by, reason string, at time.Time) (schedule.Schedule, error)
	// ClaimDueSchedules marks running, under claim, at most limit
	// schedules that are pending and due at now, or running under a
	// claim made before now-schedule.Lease, and returns them (Claim set).
	// Of several callers, each schedule goes to one.
	ClaimDueSchedules(ctx context.Context, claim string, now time.Time, limit int) ([]schedule.Schedule, error)
	// FinishSchedule stores s, which ends the running schedule s.ID
	// claimed under s.Claim (applied or failed), and, when f is not nil,
	// writes f and its version v as UpdateFeature does, in one
	// transaction; a failed one records schedule_fail (an applied one's
	// event is its version's). EConflict when the schedule is no longer
	// running under s.Claim, or the feature moved on.
	FinishSchedule(ctx context.Context, s schedule.Schedule, f *feature.Feature, v *Version) error
}

// CreateSchedule stores a pending schedule of the change sp describes,
// for the feature key, made by actorName, and returns it with its
// preview: the report of a dry run of the change now. parse makes the
// change of sp's body. It refuses (and stores nothing) a time in the past
// or more than schedule.MaxAhead ahead, a body the route refuses, a change
// the feature refuses now or that moves more than its max_churn, and an
// editor's change the settings would not let the editor make now.
func (s *Service) CreateSchedule(ctx context.Context, key string, sp schedule.Spec, parse ScheduleParser, actorName string) (schedule.Schedule, error) {
	now := s.now().UTC()
	if err := sp.Validate(now); err != nil {
		return schedule.Schedule{}, err
	}
	if err := s.checkComment(sp.Comment, false); err != nil {
		return schedule.Schedule{}, err
	}
	ch, err := parse(sp.Change.Kind, sp.Change.Body)
	if err != nil {
		return schedule.Schedule{}, err
	}
	res, err := s.Change(ctx, key, ch, ChangeOptions{DryRun: true, Actor: actorName, MaxChurn: sp.MaxChurn, Comment: sp.Comment, Role: sp.Role})
	if err != nil {
		return schedule.Schedule{}, err
	}
	switch res.Needs {
	case "approval":
		return schedule.Schedule{}, feature.Errorf(feature.EForbidden, "approvals cover feature %q, where an editor's change is a change request: a schedule cannot wait for an approval; submit the change when it is due, or ask an admin to schedule it", key)
	case "admin":
		return schedule.Schedule{}, feature.Errorf(feature.EForbidden, "the settings would refuse this change of feature %q by an editor now (it would move %s of users, or it is a reshuffle): ask an admin to schedule it", key, feature.Percent(res.Report.Churn))
	}
	sc := schedule.Schedule{
		ID: uuid.NewString(), Feature: key, FeatureID: res.Feature.ID, Environment: s.env,
		At: sp.At.UTC(), Change: schedule.Change{Kind: sp.Change.Kind, Body: feature.CompactJSON(sp.Change.Body)},
		Summary: ch.Summary(), MaxChurn: sp.MaxChurn, Comment: sp.Comment,
		Actor: actor(ChangeOptions{Actor: actorName}), Role: sp.Role, Status: schedule.Pending, CreatedAt: now,
		BaseVersion: res.Feature.Version - 1, Preview: res.Report,
	}
	if err := s.store.CreateSchedule(ctx, sc); err != nil {
		return schedule.Schedule{}, err
	}
	return sc, nil
}

// Schedules returns the schedules q selects (schedule.DefaultPage of them
// when q.Limit is 0): pending and running soonest first, then the others
// latest first. EInvalid for a bad query.
func (s *Service) Schedules(ctx context.Context, q schedule.Query) ([]schedule.Schedule, error) {
	if q.Limit == 0 {
		q.Limit = schedule.DefaultPage
	}
	switch {
	case q.Limit < 0 || q.Limit > schedule.MaxPage:
		return nil, feature.Errorf(feature.EInvalid, "list at most %d schedules at a time: got limit %d", schedule.MaxPage, q.Limit)
	case q.Status != "" && !slices.Contains(schedule.Statuses, q.Status):
		return nil, feature.Errorf(feature.EInvalid, "status %q: use pending, running, applied, failed or canceled", q.Status)
	}
	return s.store.Schedules(ctx, q)
}

// CancelSchedule cancels the pending schedule id of the feature key, by
// actorName. ENotFound when the feature has no such schedule, EConflict
// when it is no longer pending.
func (s *Service) CancelSchedule(ctx context.Context, key, id, actorName string) (schedule.Schedule, error) {
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
// lapses (schedule.Lease), it is claimed again.
func (s *Service) runSchedule(ctx context.Context, sc schedule.Schedule, parse ScheduleParser) (bool, error) {
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
		if cur.Status != schedule.Running || cur.Claim != sc.Claim {
			return false, nil // another instance claimed or finished it
		}
	}
}

// trySchedule is one attempt of runSchedule.
func (s *Service) trySchedule(ctx context.Context, sc schedule.Schedule, parse ScheduleParser) (bool, error) {
	opts := ChangeOptions{Actor: schedule.Actor, MaxChurn: sc.MaxChurn, Comment: sc.Comment, Role: sc.Role}
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
		done.Status, done.Reason = schedule.Failed, fmt.Sprintf(format, args...)
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
	ch = ch.As(audit.JoinSummary("scheduled by "+sc.Actor, ch.Summary()), audit.ScheduleApply)
	opts.gate = g
	res, err := s.applyWith(ctx, cur, ch, opts, func(f feature.Feature, v Version) error {
		done.Status, done.Version = schedule.Applied, f.Version
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
