-- When each token was last used, recorded at most about once a minute per
-- token (NULL: never since this column exists), and who created it (''
-- for tokens made before this column existed).

-- +goose Up
ALTER TABLE tokens ADD COLUMN last_used_at TEXT;
ALTER TABLE tokens ADD COLUMN created_by TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE tokens DROP COLUMN created_by;
ALTER TABLE tokens DROP COLUMN last_used_at;
