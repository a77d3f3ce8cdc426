-- Environments (rollout.Environment): development, staging, production…
-- A feature's definition is shared; its configuration is per environment:
-- a row of features per (environment, key), each with its own id, so that
-- versions, churn reports, override spans and exposures, keyed by that id,
-- are per environment as they stand. Ramps, change requests, audit events
-- and commits name their environment ('' in audit events and commits: all
-- of them, as a segment's or a token's). Tokens name theirs (NULL: every
-- environment). Everything that exists before becomes production's. A
-- deleted environment keeps its row (deleted_at), features and history.

-- +goose Up
CREATE TABLE environments (
    key        text        PRIMARY KEY,
    name       text        NOT NULL,
    protected  boolean     NOT NULL DEFAULT false,
    position   integer     NOT NULL,
    created_at timestamptz NOT NULL,
    deleted_at timestamptz
);
INSERT INTO environments (key, name, protected, position, created_at) VALUES ('production', 'Production', false, 0, now());

ALTER TABLE features ADD COLUMN environment text NOT NULL DEFAULT 'production';
ALTER TABLE features DROP CONSTRAINT features_key_key;
ALTER TABLE features ADD CONSTRAINT features_environment_key UNIQUE (environment, key);

ALTER TABLE commits ADD COLUMN environment text NOT NULL DEFAULT '';
UPDATE commits SET environment = 'production' WHERE kind = 'feature';
ALTER TABLE commits DROP CONSTRAINT commits_kind_check;
ALTER TABLE commits ADD CONSTRAINT commits_kind_check CHECK (kind IN ('feature', 'token', 'segment', 'environment'));

ALTER TABLE ramps ADD COLUMN environment text NOT NULL DEFAULT 'production';
DROP INDEX ramps_feature;
DROP INDEX ramps_live;
CREATE INDEX ramps_feature ON ramps (environment, feature_key, created_at);
CREATE UNIQUE INDEX ramps_live ON ramps (environment, feature_key) WHERE state IN ('active', 'paused');

ALTER TABLE change_requests ADD COLUMN environment text NOT NULL DEFAULT 'production';
DROP INDEX change_requests_feature;
CREATE INDEX change_requests_feature ON change_requests (environment, feature_key, created_at);

ALTER TABLE audit_events ADD COLUMN environment text NOT NULL DEFAULT 'production';
CREATE INDEX audit_events_environment ON audit_events (environment, id);

ALTER TABLE tokens ADD COLUMN environment text;
UPDATE tokens SET environment = 'production' WHERE role IN ('evaluate', 'sdk', 'client');

-- +goose Down
DELETE FROM features WHERE environment <> 'production';
ALTER TABLE features DROP CONSTRAINT features_environment_key;
ALTER TABLE features DROP COLUMN environment;
ALTER TABLE features ADD CONSTRAINT features_key_key UNIQUE (key);

UPDATE commits SET kind = 'feature', key = 'environment:' || key WHERE kind = 'environment';
ALTER TABLE commits DROP CONSTRAINT commits_kind_check;
ALTER TABLE commits ADD CONSTRAINT commits_kind_check CHECK (kind IN ('feature', 'token', 'segment'));
ALTER TABLE commits DROP COLUMN environment;

DELETE FROM ramps WHERE environment <> 'production';
DROP INDEX ramps_feature;
DROP INDEX ramps_live;
ALTER TABLE ramps DROP COLUMN environment;
CREATE INDEX ramps_feature ON ramps (feature_key, created_at);
CREATE UNIQUE INDEX ramps_live ON ramps (feature_key) WHERE state IN ('active', 'paused');

DELETE FROM change_requests WHERE environment <> 'production';
DROP INDEX change_requests_feature;
ALTER TABLE change_requests DROP COLUMN environment;
CREATE INDEX change_requests_feature ON change_requests (feature_key, created_at);

DROP INDEX audit_events_environment;
ALTER TABLE audit_events DROP COLUMN environment;

UPDATE tokens SET revoked_at = now() WHERE environment <> 'production' AND revoked_at IS NULL;
ALTER TABLE tokens DROP COLUMN environment;

DROP TABLE environments;
