-- Archived features and the audit trail. A feature whose archived_at is
-- set is kept with its history but not served; only a purge removes it.
-- audit_events is append-only: every change writes its event in its own
-- transaction, and a trigger refuses to update or delete one (a purge of a
-- feature keeps its events: feature_key is text, not a foreign key).

-- +goose Up
ALTER TABLE features ADD COLUMN archived_at timestamptz;

CREATE TABLE audit_events (
    id          bigint           GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    created_at  timestamptz      NOT NULL,
    actor       text             NOT NULL,
    kind        text             NOT NULL,
    feature_key text             NOT NULL DEFAULT '',
    feature_id  text             NOT NULL DEFAULT '',
    version     integer          NOT NULL DEFAULT 0,
    subject     text             NOT NULL DEFAULT '',
    summary     text             NOT NULL,
    comment     text             NOT NULL DEFAULT '',
    churn       double precision
);
CREATE INDEX audit_events_feature ON audit_events (feature_key, id);
CREATE INDEX audit_events_actor ON audit_events (actor, id);
CREATE INDEX audit_events_kind ON audit_events (kind, id);
CREATE INDEX audit_events_time ON audit_events (created_at);

-- +goose StatementBegin
CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit events are append-only: they are never updated or deleted';
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();
CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only();

-- +goose Down
DROP TABLE audit_events;
DROP FUNCTION audit_events_append_only();
ALTER TABLE features DROP COLUMN archived_at;
