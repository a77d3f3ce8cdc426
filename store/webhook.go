package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/webhook"
)

var (
	_ webhook.Store  = (*DB)(nil)
	_ webhook.Outbox = (*DB)(nil)
)

const webhookColumns = `id, url, secret, events, created_at, created_by, state, paused_at, paused_reason,
	event_cursor, failures, first_failure_at, next_attempt_at`

func scanWebhook(rows *sql.Rows) (webhook.Hook, error) {
	var (
		h                           webhook.Hook
		events, state               string
		created, paused, first, due timestamp
	)
	if err := rows.Scan(&h.ID, &h.URL, &h.Secret, &events, &created, &h.CreatedBy, &state, &paused, &h.PausedReason,
		&h.Cursor, &h.Failures, &first, &due); err != nil {
		return h, err
	}
	if err := json.Unmarshal([]byte(events), &h.Events); err != nil {
		return h, fmt.Errorf("webhook %s: events: %w", h.ID, err)
	}
	h.CreatedAt, h.State, h.NextAttempt = created.T, webhook.State(state), due.T
	if paused.Valid {
		h.PausedAt = &paused.T
	}
	if first.Valid {
		h.FirstFailure = &first.T
	}
	return h, nil
}

// CreateWebhook stores h with its cursor at the last audit event, and
// records its audit event. feature.EConflict when webhook.MaxHooks
// exist or the ID is taken.
func (db *DB) CreateWebhook(ctx context.Context, h webhook.Hook) (webhook.Hook, error) {
	events, err := json.Marshal(h.Events)
	if err != nil {
		return h, err
	}
	err = db.writeTx(ctx, "create webhook", func(tx *tx) error {
		var n int
		if err := tx.queryRow(`SELECT COUNT(*) FROM webhooks`).Scan(&n); err != nil {
			return err
		}
		if n >= webhook.MaxHooks {
			return feature.Errorf(feature.EConflict, "there are %d webhooks, the most there may be: delete one first", n)
		}
		// The event of this creation is the first the webhook receives.
		if err := tx.queryRow(`SELECT COALESCE(MAX(id), 0) FROM audit_events`).Scan(&h.Cursor); err != nil {
			return err
		}
		_, err := tx.exec(`INSERT INTO webhooks (id, url, secret, events, created_at, created_by, state, event_cursor, next_attempt_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			h.ID, h.URL, h.Secret, string(events), db.d.Time(h.CreatedAt), h.CreatedBy, string(h.State), h.Cursor, db.d.Time(h.NextAttempt))
		if tx.constraint(err) == PrimaryKey {
			return feature.Errorf(feature.EConflict, "a webhook with ID %q already exists", h.ID)
		}
		if err != nil {
			return err
		}
		return tx.appendAudit(audit.Event{Time: h.CreatedAt, Actor: h.CreatedBy, Kind: audit.WebhookCreate, Subject: h.ID,
			Summary: fmt.Sprintf("registered webhook %s for %s events", webhook.Site(h.URL), strings.Join(h.Events, ", "))})
	})
	return h, err
}

// Webhooks returns every webhook, oldest first.
func (db *DB) Webhooks(ctx context.Context) ([]webhook.Hook, error) {
	var out []webhook.Hook
	err := db.read(ctx, "list webhooks", func(tx *tx) error {
		rows, err := tx.query(`SELECT ` + webhookColumns + ` FROM webhooks ORDER BY created_at, id{C}`)
		out, err = collect(rows, err, scanWebhook)
		return err
	})
	return out, err
}

// Webhook returns the webhook id; feature.ENotFound when there is none.
func (db *DB) Webhook(ctx context.Context, id string) (webhook.Hook, error) {
	var h webhook.Hook
	err := db.read(ctx, "read webhook", func(tx *tx) error {
		rows, err := tx.query(`SELECT `+webhookColumns+` FROM webhooks WHERE id = ?`, id)
		h, err = first(rows, err, scanWebhook, feature.Errorf(feature.ENotFound, "no webhook has ID %q: list them with GET /api/webhooks", id))
		return err
	})
	return h, err
}

// WebhookDeliveries returns the latest attempts of webhook id, newest
// first, at most limit (all kept when limit <= 0).
func (db *DB) WebhookDeliveries(ctx context.Context, id string, limit int) ([]webhook.Delivery, error) {
	if limit <= 0 {
		limit = webhook.DeliveryKept
	}
	var out []webhook.Delivery
	err := db.read(ctx, "list webhook deliveries", func(tx *tx) error {
		rows, err := tx.query(`SELECT id, webhook_id, event_id, event_kind, attempt, at, status, error, detail, duration_ms
			FROM webhook_deliveries WHERE webhook_id = ? ORDER BY id DESC LIMIT ?`, id, limit)
		out, err = collect(rows, err, func(rows *sql.Rows) (webhook.Delivery, error) {
			var (
				d    webhook.Delivery
				kind string
				at   timestamp
			)
			err := rows.Scan(&d.ID, &d.Webhook, &d.EventID, &kind, &d.Attempt, &at, &d.Status, &d.Error, &d.Detail, &d.Duration)
			d.EventKind, d.Time = audit.Kind(kind), at.T
			return d, err
		})
		return err
	})
	return out, err
}

// DeleteWebhook removes webhook id and its log and records the audit event.
func (db *DB) DeleteWebhook(ctx context.Context, id, actor string, at time.Time) error {
	return db.writeTx(ctx, fmt.Sprintf("delete webhook %q", id), func(tx *tx) error {
		var u string
		err := tx.queryRow(`DELETE FROM webhooks WHERE id = ? RETURNING url`, id).Scan(&u)
		if errors.Is(err, sql.ErrNoRows) {
			return feature.Errorf(feature.ENotFound, "no webhook has ID %q: list them with GET /api/webhooks", id)
		}
		if err != nil {
			return err
		}
		return tx.appendAudit(audit.Event{Time: at, Actor: actor, Kind: audit.WebhookDelete, Subject: id,
			Summary: "removed webhook " + webhook.Site(u)})
	})
}

// ResumeWebhook makes the paused webhook id active and due at once.
func (db *DB) ResumeWebhook(ctx context.Context, id, actor string, at time.Time) error {
	return db.writeTx(ctx, fmt.Sprintf("resume webhook %q", id), func(tx *tx) error {
		var u, state string
		err := tx.queryRow(`SELECT url, state FROM webhooks WHERE id = ? {forUpdate}`, id).Scan(&u, &state)
		if errors.Is(err, sql.ErrNoRows) {
			return feature.Errorf(feature.ENotFound, "no webhook has ID %q: list them with GET /api/webhooks", id)
		}
		if err != nil {
			return err
		}
		if webhook.State(state) != webhook.Paused {
			return feature.Errorf(feature.EConflict, "webhook %q is %s, not paused: there is nothing to resume", id, state)
		}
		if _, err := tx.exec(`UPDATE webhooks SET state = ?, paused_at = NULL, paused_reason = '', failures = 0,
			first_failure_at = NULL, next_attempt_at = ?, lease_owner = '', lease_until = NULL WHERE id = ?`,
			string(webhook.Active), db.d.Time(at), id); err != nil {
			return err
		}
		return tx.appendAudit(audit.Event{Time: at, Actor: actor, Kind: audit.WebhookResume, Subject: id,
			Summary: "resumed webhook " + webhook.Site(u) + ": delivery goes on from the event it stopped at"})
	})
}

// claimScan bounds the events ClaimWebhooks reads after a webhook's cursor
// looking for one it wants.
const claimScan = 200

// ClaimWebhooks leases due webhooks with an event to send to owner. On
// PostgreSQL the webhooks' rows are selected FOR UPDATE SKIP LOCKED, so
// that concurrent claimers take different ones without waiting; on SQLite
// write transactions take turns. A lease is taken only where none is held
// (lease_until is past or NULL), so no two owners hold a webhook at once.
func (db *DB) ClaimWebhooks(ctx context.Context, owner string, now time.Time, lease time.Duration, limit int) ([]webhook.Claim, error) {
	if limit <= 0 {
		return nil, nil
	}
	// A read first, so that an idle worker (no webhooks, nothing due, no
	// new event) writes nothing.
	due := `FROM webhooks w WHERE w.state = ? AND w.next_attempt_at <= ? AND (w.lease_until IS NULL OR w.lease_until < ?)
		AND EXISTS (SELECT 1 FROM audit_events e WHERE e.id > w.event_cursor)`
	args := []any{string(webhook.Active), db.d.Time(now), db.d.Time(now)}
	var n int
	if err := db.read(ctx, "find due webhooks", func(tx *tx) error {
		return tx.queryRow(`SELECT COUNT(*) `+due, args...).Scan(&n)
	}); err != nil || n == 0 {
		return nil, err
	}
	lock := ""
	if db.d.ForUpdate != "" {
		lock = " " + db.d.ForUpdate + " OF w SKIP LOCKED"
	}
	var out []webhook.Claim
	err := db.writeTx(ctx, "claim webhooks", func(tx *tx) error {
		out = nil
		rows, err := tx.query(`SELECT `+prefixed("w.", webhookColumns)+` `+due+` ORDER BY w.next_attempt_at, w.id{C} LIMIT ?`+lock, append(args, limit)...)
		hooks, err := collect(rows, err, scanWebhook)
		if err != nil {
			return err
		}
		for _, h := range hooks {
			e, cursor, found, err := tx.nextWanted(h)
			if err != nil {
				return err
			}
			if !found { // nothing it wants yet: skip what it does not
				if cursor > h.Cursor {
					if _, err := tx.exec(`UPDATE webhooks SET event_cursor = ? WHERE id = ?`, cursor, h.ID); err != nil {
						return err
					}
				}
				continue
			}
			if _, err := tx.exec(`UPDATE webhooks SET event_cursor = ?, lease_owner = ?, lease_until = ? WHERE id = ?`,
				cursor, owner, db.d.Time(now.Add(lease)), h.ID); err != nil {
				return err
			}
			h.Cursor = cursor
			out = append(out, webhook.Claim{Hook: h, Event: e})
		}
		return nil
	})
	return out, err
}

// nextWanted returns the first event after h's cursor that h wants, and
// the cursor just before it; or, when none of the next claimScan events is
// wanted, found false and the cursor past them.
func (tx *tx) nextWanted(h webhook.Hook) (e audit.Event, cursor int64, found bool, err error) {
	events, err := tx.db.auditEvents(tx, audit.Query{After: h.Cursor, Ascending: true, Limit: claimScan})
	if err != nil {
		return e, 0, false, err
	}
	cursor = h.Cursor
	for _, ev := range events {
		if h.Wants(ev.Kind) {
			return ev, cursor, true, nil
		}
		cursor = ev.ID
	}
	return e, cursor, false, nil
}

func prefixed(p, columns string) string {
	parts := strings.Split(columns, ",")
	for i, c := range parts {
		parts[i] = p + strings.TrimSpace(c)
	}
	return strings.Join(parts, ", ")
}

// FinishWebhook records an attempt and, while owner holds the lease, the
// webhook's new state.
func (db *DB) FinishWebhook(ctx context.Context, owner, id string, o webhook.Outcome) (bool, error) {
	held := false
	err := db.writeTx(ctx, fmt.Sprintf("record delivery to webhook %q", id), func(tx *tx) error {
		held = false
		var h webhook.Hook
		rows, err := tx.query(`SELECT `+webhookColumns+` FROM webhooks WHERE id = ? AND lease_owner = ? {forUpdate}`, id, owner)
		hooks, err := collect(rows, err, scanWebhook)
		if err != nil {
			return err
		}
		d := o.Delivery
		if _, err := tx.exec(`INSERT INTO webhook_deliveries (webhook_id, event_id, event_kind, attempt, at, status, error, detail, duration_ms)
			SELECT id, ?, ?, ?, ?, ?, ?, ?, ? FROM webhooks WHERE id = ?`,
			d.EventID, string(d.EventKind), d.Attempt, db.d.Time(d.Time), d.Status, d.Error, d.Detail, d.Duration, id); err != nil {
			return err
		}
		if _, err := tx.exec(`DELETE FROM webhook_deliveries WHERE webhook_id = ? AND id <= (
			SELECT id FROM webhook_deliveries WHERE webhook_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?)`,
			id, id, webhook.DeliveryKept); err != nil {
			return err
		}
		if len(hooks) == 0 {
			return nil // deleted, or claimed by another owner after our lease ran out
		}
		h, held = hooks[0], true
		var first any
		if o.FirstFailure != nil {
			first = db.d.Time(*o.FirstFailure)
		}
		state, pausedAt := webhook.Active, any(nil)
		if o.Pause != "" {
			state, pausedAt = webhook.Paused, db.d.Time(d.Time)
		}
		if _, err := tx.exec(`UPDATE webhooks SET event_cursor = ?, failures = ?, first_failure_at = ?, next_attempt_at = ?,
			state = ?, paused_at = ?, paused_reason = ?, lease_owner = '', lease_until = NULL WHERE id = ?`,
			o.Cursor, o.Failures, first, db.d.Time(o.NextAttempt), string(state), pausedAt, o.Pause, id); err != nil {
			return err
		}
		if o.Pause != "" {
			return tx.appendAudit(webhook.PausedEvent(h, o.Pause, d.Time))
		}
		return nil
	})
	return held, err
}
