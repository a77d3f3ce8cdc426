-- +goose Up
-- An environment may require a comment on every change made there.
ALTER TABLE environments ADD COLUMN require_comment INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE environments DROP COLUMN require_comment;
