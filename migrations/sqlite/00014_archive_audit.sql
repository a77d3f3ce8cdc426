-- Archived features and the audit trail. A feature whose archived_at is
-- set is kept with its history but not served; only a purge removes it.
-- audit_events is append-only: every change writes its event in its own
-- transaction, and triggers refuse to update or delete one (a purge of a
-- feature keeps its events: feature_key is text, not a foreign key).

-- +goose Up
ALTER TABLE features ADD COLUMN archived_at TEXT;

CREATE TABLE audit_events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at  TEXT    NOT NULL,
    actor       TEXT    NOT NULL,
    kind        TEXT    NOT NULL,
    feature_key TEXT    NOT NULL DEFAULT '',
    feature_id  TEXT    NOT NULL DEFAULT '',
    version     INTEGER NOT NULL DEFAULT 0,
    subject     TEXT    NOT NULL DEFAULT '',
    summary     TEXT    NOT NULL,
    comment     TEXT    NOT NULL DEFAULT '',
    churn       REAL
);
CREATE INDEX audit_events_feature ON audit_events (feature_key, id);
CREATE INDEX audit_events_actor ON audit_events (actor, id);
CREATE INDEX audit_events_kind ON audit_events (kind, id);
CREATE INDEX audit_events_time ON audit_events (created_at);

-- +goose StatementBegin
CREATE TRIGGER audit_events_no_update BEFORE UPDATE ON audit_events
BEGIN
    SELECT RAISE(ABORT, 'audit events are append-only: they are never updated');
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER audit_events_no_delete BEFORE DELETE ON audit_events
BEGIN
    SELECT RAISE(ABORT, 'audit events are append-only: they are never deleted');
END;
-- +goose StatementEnd

-- +goose Down
DROP TABLE audit_events;
ALTER TABLE features DROP COLUMN archived_at;
