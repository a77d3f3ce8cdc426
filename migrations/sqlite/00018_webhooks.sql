-- Webhooks: URLs that receive every audited event (audit_events) as JSON.
-- Each webhook has a cursor, the ID of the last event it has handled
-- (delivered, or skipped by its events filter); a delivery worker claims a
-- webhook with a lease (lease_owner, lease_until) so that, with several
-- instances on one database, each event is sent once per webhook while
-- the lease holds. webhook_deliveries is the recent log of attempts.

-- +goose Up
CREATE TABLE webhooks (
    id               TEXT    PRIMARY KEY,
    url              TEXT    NOT NULL,
    secret           TEXT    NOT NULL,
    events           TEXT    NOT NULL,
    created_at       TEXT    NOT NULL,
    created_by       TEXT    NOT NULL DEFAULT '',
    state            TEXT    NOT NULL DEFAULT 'active',
    paused_at        TEXT,
    paused_reason    TEXT    NOT NULL DEFAULT '',
    event_cursor     INTEGER NOT NULL DEFAULT 0,
    failures         INTEGER NOT NULL DEFAULT 0,
    first_failure_at TEXT,
    next_attempt_at  TEXT    NOT NULL,
    lease_owner      TEXT    NOT NULL DEFAULT '',
    lease_until      TEXT
);
CREATE INDEX webhooks_due ON webhooks (state, next_attempt_at);

CREATE TABLE webhook_deliveries (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    webhook_id  TEXT    NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event_id    INTEGER NOT NULL,
    event_kind  TEXT    NOT NULL,
    attempt     INTEGER NOT NULL,
    at          TEXT    NOT NULL,
    status      INTEGER NOT NULL DEFAULT 0,
    error       TEXT    NOT NULL DEFAULT '',
    duration_ms INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX webhook_deliveries_hook ON webhook_deliveries (webhook_id, id);

-- +goose Down
DROP TABLE webhook_deliveries;
DROP TABLE webhooks;
