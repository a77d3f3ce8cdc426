-- A comment on each change, written by whoever made it (empty: none); seq
-- numbers versions in insertion order across features for the audit log's
-- paging (existing versions are numbered in time order); an index for its
-- filter by actor.

-- +goose Up
ALTER TABLE versions ADD COLUMN comment text NOT NULL DEFAULT '';
ALTER TABLE versions ADD COLUMN seq bigint;
UPDATE versions SET seq = n.seq
FROM (SELECT feature_id, version, row_number() OVER (ORDER BY created_at, feature_id, version) AS seq FROM versions) n
WHERE versions.feature_id = n.feature_id AND versions.version = n.version;
CREATE SEQUENCE versions_seq OWNED BY versions.seq;
SELECT setval('versions_seq', COALESCE((SELECT max(seq) FROM versions), 0) + 1, false);
ALTER TABLE versions ALTER COLUMN seq SET DEFAULT nextval('versions_seq');
ALTER TABLE versions ALTER COLUMN seq SET NOT NULL;
CREATE UNIQUE INDEX versions_seq_key ON versions (seq);
CREATE INDEX versions_actor ON versions (actor, seq);

-- +goose Down
DROP INDEX versions_actor;
ALTER TABLE versions DROP COLUMN seq;
ALTER TABLE versions DROP COLUMN comment;
