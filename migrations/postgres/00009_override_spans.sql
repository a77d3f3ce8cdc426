-- History without a copy of every override in every version. A version's
-- config keeps "overrides" as {} (null when it had none) and override_count
-- says how many it had; override_spans holds each override once per run of
-- versions that had it: from version since up to, not including, until
-- (NULL: the newest version still has it). Version N's overrides are the
-- spans with since <= N and until NULL or above N. Existing versions are
-- converted: their overrides become spans; their configs are rebuilt from
-- json_each, which gives each member's text as written, so that everything
-- but the overrides stays byte for byte (json, not jsonb).

-- +goose Up
CREATE TABLE override_spans (
    feature_id text    NOT NULL REFERENCES features (id) ON DELETE CASCADE,
    user_id    text    NOT NULL,
    bucket     text    NOT NULL,
    since      integer NOT NULL,
    until      integer,
    PRIMARY KEY (feature_id, user_id, since)
);
CREATE INDEX override_spans_since ON override_spans (feature_id, since, until);
CREATE INDEX override_spans_open ON override_spans (feature_id, user_id) WHERE until IS NULL;
ALTER TABLE versions ADD COLUMN override_count integer NOT NULL DEFAULT 0;

-- n numbers each feature's versions 1, 2, …; a run is a user's override to
-- one bucket in consecutive versions, and ends at the version after its
-- last (none: the newest).
INSERT INTO override_spans (feature_id, user_id, bucket, since, until)
WITH ranked AS (
    SELECT feature_id, version, config,
           row_number() OVER (PARTITION BY feature_id ORDER BY version) AS n
    FROM versions
), held AS (
    SELECT r.feature_id, r.version, r.n, e.key AS user_id, e.value AS bucket
    FROM ranked r,
         json_each_text(CASE WHEN json_typeof(r.config -> 'overrides') = 'object' THEN r.config -> 'overrides' ELSE '{}'::json END) e
), runs AS (
    SELECT feature_id, user_id, bucket, version, n,
           n - row_number() OVER (PARTITION BY feature_id, user_id, bucket ORDER BY n) AS run
    FROM held
), spans AS (
    SELECT feature_id, user_id, bucket, min(version) AS since, max(n) AS last
    FROM runs
    GROUP BY feature_id, user_id, bucket, run
)
SELECT s.feature_id, s.user_id, s.bucket, s.since, after.version
FROM spans s
LEFT JOIN ranked after ON after.feature_id = s.feature_id AND after.n = s.last + 1;

UPDATE versions v
SET override_count = (SELECT count(*) FROM json_object_keys(v.config -> 'overrides')),
    config = (
        SELECT ('{' || string_agg(to_json(e.key)::text || ':' || CASE WHEN e.key = 'overrides' THEN '{}' ELSE e.value::text END, ',' ORDER BY e.n) || '}')::json
        FROM json_each(v.config) WITH ORDINALITY AS e (key, value, n))
WHERE json_typeof(v.config -> 'overrides') = 'object';

-- +goose Down
UPDATE versions v
SET config = (
    SELECT ('{' || string_agg(to_json(e.key)::text || ':' || CASE WHEN e.key = 'overrides' THEN COALESCE((
        SELECT json_object_agg(s.user_id, s.bucket)::text
        FROM override_spans s
        WHERE s.feature_id = v.feature_id AND s.since <= v.version
          AND (s.until IS NULL OR s.until > v.version)), '{}') ELSE e.value::text END, ',' ORDER BY e.n) || '}')::json
    FROM json_each(v.config) WITH ORDINALITY AS e (key, value, n))
WHERE json_typeof(v.config -> 'overrides') = 'object';
ALTER TABLE versions DROP COLUMN override_count;
DROP TABLE override_spans;
