-- Webhooks: URLs that receive every audited event (audit_events) as JSON.
-- Each webhook has a cursor, the ID of the last event it has handled
-- (delivered, or skipped by its events filter); a delivery worker claims a
-- webhook with a lease (lease_owner, lease_until; SELECT … FOR UPDATE SKIP
-- LOCKED) so that, with several instances on one database, each event is
-- sent once per webhook while the lease holds. webhook_deliveries is the
-- recent log of attempts.

-- +goose Up
CREATE TABLE webhooks (
    id               text        PRIMARY KEY,
    url              text        NOT NULL,
    secret           text        NOT NULL,
    events           text        NOT NULL,
    created_at       timestamptz NOT NULL,
    created_by       text        NOT NULL DEFAULT '',
    state            text        NOT NULL DEFAULT 'active',
    paused_at        timestamptz,
    paused_reason    text        NOT NULL DEFAULT '',
    event_cursor     bigint      NOT NULL DEFAULT 0,
    failures         integer     NOT NULL DEFAULT 0,
    first_failure_at timestamptz,
    next_attempt_at  timestamptz NOT NULL,
    lease_owner      text        NOT NULL DEFAULT '',
    lease_until      timestamptz
);
CREATE INDEX webhooks_due ON webhooks (state, next_attempt_at);

CREATE TABLE webhook_deliveries (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    webhook_id  text        NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event_id    bigint      NOT NULL,
    event_kind  text        NOT NULL,
    attempt     integer     NOT NULL,
    at          timestamptz NOT NULL,
    status      integer     NOT NULL DEFAULT 0,
    error       text        NOT NULL DEFAULT '',
    duration_ms bigint      NOT NULL DEFAULT 0
);
CREATE INDEX webhook_deliveries_hook ON webhook_deliveries (webhook_id, id);

-- +goose Down
DROP TABLE webhook_deliveries;
DROP TABLE webhooks;
