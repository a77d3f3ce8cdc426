-- A comment on each change, written by whoever made it (empty: none), and an
-- index for the audit log's filter by actor. The audit log of every feature
-- pages by the versions table's rowid, which grows with each insert.

-- +goose Up
ALTER TABLE versions ADD COLUMN comment TEXT NOT NULL DEFAULT '';
CREATE INDEX versions_actor ON versions (actor);

-- +goose Down
DROP INDEX versions_actor;
ALTER TABLE versions DROP COLUMN comment;
