package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/schedule"
)

// Scheduled changes (schedule.Schedule). The schedule is the JSON in body;
// the status, claim and due_at columns are what the caps, the lists and
// the claims read, and the status and claim columns are authoritative
// over the body's copy.

// CreateSchedule stores the pending schedule s and records its
// schedule_create event. It returns feature.EConflict when the feature
// has schedule.MaxPendingPerFeature pending schedules already, or the
// environment schedule.MaxPendingPerEnvironment.
func (db *DB) CreateSchedule(ctx context.Context, s schedule.Schedule) error {
	body, err := encodeJSON(s)
	if err != nil {
		return fmt.Errorf("create schedule of feature %q: %w", s.Feature, err)
	}
	return db.writeTx(ctx, fmt.Sprintf("create schedule of feature %q", s.Feature), func(tx *tx) error {
		// The audit event first: on PostgreSQL it takes the lock every
		// writer takes, so that two schedules made at once cannot both
		// find room for one.
		if err := tx.appendAudit(schedule.Event(s, audit.ScheduleCreate)); err != nil {
			return err
		}
		var feat, env int
		if err := tx.queryRow(`
			SELECT COUNT(CASE WHEN feature_key = ? THEN 1 END), COUNT(*) FROM schedules
			WHERE environment = ? AND status = 'pending'`, s.Feature, tx.env()).Scan(&feat, &env); err != nil {
			return err
		}
		switch {
		case feat >= schedule.MaxPendingPerFeature:
			return feature.Errorf(feature.EConflict, "feature %q has %d pending schedules, the most it may have: cancel some first", s.Feature, feat)
		case env >= schedule.MaxPendingPerEnvironment:
			return feature.Errorf(feature.EConflict, "environment %s has %d pending schedules, the most it may have: cancel some first", tx.env(), env)
		}
		_, err := tx.exec(`
			INSERT INTO schedules (id, environment, feature_key, status, due_at, body, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`,
			s.ID, tx.env(), s.Feature, string(schedule.Pending), db.d.Time(s.At), body, db.d.Time(s.CreatedAt))
		if tx.constraint(err) == PrimaryKey {
			return feature.Errorf(feature.EConflict, "a schedule with ID %q already exists", s.ID)
		}
		return err
	})
}

// Schedule returns the schedule id; feature.ENotFound when there is none.
func (db *DB) Schedule(ctx context.Context, id string) (schedule.Schedule, error) {
	var s schedule.Schedule
	err := db.readTx(ctx, fmt.Sprintf("read schedule %q", id), func(tx *tx) (err error) {
		s, err = tx.findSchedule(id)
		return err
	})
	return s, err
}

// Schedules returns the schedules q selects: pending and running ones
// soonest first, then the others latest first.
func (db *DB) Schedules(ctx context.Context, q schedule.Query) ([]schedule.Schedule, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 1 << 30
	}
	var out []schedule.Schedule
	err := db.readTx(ctx, "list schedules", func(tx *tx) error {
		rows, err := tx.query(`
			SELECT body, status, claim FROM schedules
			WHERE environment = ? AND (CAST(? AS TEXT) = '' OR feature_key = ?) AND (CAST(? AS TEXT) = '' OR status = ?)
			ORDER BY CASE WHEN status IN ('pending', 'running') THEN 0 ELSE 1 END,
				CASE WHEN status IN ('pending', 'running') THEN due_at END, due_at DESC, id
			LIMIT ?`, tx.env(), q.Feature, q.Feature, string(q.Status), string(q.Status), limit)
		out, err = collect(rows, err, scanSchedule)
		return err
	})
	return out, err
}

// CancelSchedule marks the pending schedule id of feature key canceled,
// and records its schedule_cancel event. It returns feature.ENotFound
// when the feature has no such schedule and feature.EConflict when it is
// not pending.
func (db *DB) CancelSchedule(ctx context.Context, key, id, by, reason string, at time.Time) (schedule.Schedule, error) {
	var s schedule.Schedule
	err := db.writeTx(ctx, fmt.Sprintf("cancel schedule %q", id), func(tx *tx) (err error) {
		s, err = tx.findSchedule(id)
		if feature.ErrorCode(err) == feature.ENotFound || err == nil && s.Feature != key {
			return feature.Errorf(feature.ENotFound, "feature %q has no schedule %q", key, id)
		}
		if err != nil {
			return err
		}
		s, err = tx.cancelSchedule(s, by, reason, at)
		return err
	})
	return s, err
}

// ClaimDueSchedules marks running under claim at most limit schedules
// that are pending and due at now, or running under a claim older than
// schedule.Lease, and returns them. Each row's update is
// conditional on what made it claimable, so that of several callers
// exactly one claims it: on PostgreSQL the others wait for its row lock,
// then find it claimed.
func (db *DB) ClaimDueSchedules(ctx context.Context, claim string, now time.Time, limit int) ([]schedule.Schedule, error) {
	stale := db.d.Time(now.Add(-schedule.Lease))
	var out []schedule.Schedule
	err := db.writeTx(ctx, "claim due schedules", func(tx *tx) error {
		out = nil
		rows, err := tx.query(`
			SELECT id FROM schedules
			WHERE environment = ? AND (status = 'pending' AND due_at <= ? OR status = 'running' AND claimed_at <= ?)
			ORDER BY due_at, id LIMIT ?`, tx.env(), db.d.Time(now), stale, limit)
		ids, err := collect(rows, err, func(rows *sql.Rows) (id string, err error) { return id, rows.Scan(&id) })
		if err != nil {
			return err
		}
		for _, id := range ids {
			n, err := tx.affected(`
				UPDATE schedules SET status = 'running', claim = ?, claimed_at = ?
				WHERE environment = ? AND id = ? AND (status = 'pending' AND due_at <= ? OR status = 'running' AND claimed_at <= ?)`,
				claim, db.d.Time(now), tx.env(), id, db.d.Time(now), stale)
			if err != nil {
				return err
			}
			if n == 0 {
				continue // another caller claimed it first
			}
			s, err := tx.findSchedule(id)
			if err != nil {
				return err
			}
			out = append(out, s)
		}
		return nil
	})
	return out, err
}

// FinishSchedule stores s, the end of the running schedule s.ID claimed
// under s.Claim, and, with f, writes f and its version v as UpdateFeature
// does, in one transaction; a failed schedule's schedule_fail event is
// recorded (an applied one's is its version's). It returns
// feature.EConflict when the schedule is not running under s.Claim or the
// feature moved on.
func (db *DB) FinishSchedule(ctx context.Context, s schedule.Schedule, f *feature.Feature, v *rollout.Version) error {
	if f != nil && (v == nil || v.Version != f.Version) {
		return fmt.Errorf("finish schedule %q: the feature's version and its history entry differ", s.ID)
	}
	body, err := encodeJSON(s)
	if err != nil {
		return fmt.Errorf("finish schedule %q: %w", s.ID, err)
	}
	return db.writeTx(ctx, fmt.Sprintf("finish schedule %q of feature %q", s.ID, s.Feature), func(tx *tx) error {
		// The schedule's row first: of two transactions racing for it,
		// the second waits on it and then finds it finished.
		n, err := tx.affected(`
			UPDATE schedules SET status = ?, body = ?, claim = '', claimed_at = NULL
			WHERE environment = ? AND id = ? AND status = 'running' AND claim = ?`,
			string(s.Status), body, tx.env(), s.ID, s.Claim)
		switch {
		case err != nil:
			return err
		case n == 0:
			return feature.Errorf(feature.EConflict, "schedule %q is no longer claimed by this instance", s.ID)
		case f != nil:
			return tx.writeVersion(*f, *v) // its version's audit event records the schedule
		case s.Status == schedule.Failed:
			return tx.appendAudit(schedule.Event(s, audit.ScheduleFail))
		}
		return nil
	})
}

// cancelSchedules cancels the pending schedules of the feature key, by by
// with reason, each with its audit event: what an archive does.
func (tx *tx) cancelSchedules(key, by, reason string, at time.Time) error {
	rows, err := tx.query(`SELECT body, status, claim FROM schedules WHERE environment = ? AND feature_key = ? AND status = 'pending'`, tx.env(), key)
	pending, err := collect(rows, err, scanSchedule)
	if err != nil {
		return fmt.Errorf("read pending schedules: %w", err)
	}
	for _, s := range pending {
		if _, err := tx.cancelSchedule(s, by, reason, at); err != nil {
			return err
		}
	}
	return nil
}

// cancelSchedule marks s, read in tx, canceled; EConflict when it is not
// pending.
func (tx *tx) cancelSchedule(s schedule.Schedule, by, reason string, at time.Time) (schedule.Schedule, error) {
	if s.Status != schedule.Pending {
		return s, feature.Errorf(feature.EConflict, "schedule %q is %s: only a pending schedule can be canceled", s.ID, s.Status)
	}
	s.Status, s.DoneBy, s.Reason = schedule.Canceled, by, reason
	s.DoneAt = &at
	body, err := encodeJSON(s)
	if err != nil {
		return s, err
	}
	n, err := tx.affected(`UPDATE schedules SET status = 'canceled', body = ? WHERE environment = ? AND id = ? AND status = 'pending'`, body, tx.env(), s.ID)
	switch {
	case err != nil:
		return s, err
	case n == 0:
		return s, feature.Errorf(feature.EConflict, "schedule %q is no longer pending: only a pending schedule can be canceled", s.ID)
	}
	return s, tx.appendAudit(schedule.Event(s, audit.ScheduleCancel))
}

func (tx *tx) findSchedule(id string) (schedule.Schedule, error) {
	rows, err := tx.query(`SELECT body, status, claim FROM schedules WHERE environment = ? AND id = ?`, tx.env(), id)
	return first(rows, err, scanSchedule, feature.Errorf(feature.ENotFound, "schedule %q does not exist", id))
}

func scanSchedule(rows *sql.Rows) (schedule.Schedule, error) {
	var (
		s                   schedule.Schedule
		body, status, claim string
	)
	if err := rows.Scan(&body, &status, &claim); err != nil {
		return s, err
	}
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		return s, fmt.Errorf("decode schedule: %w", err)
	}
	s.Status, s.Claim = schedule.Status(status), claim
	return s, nil
}
