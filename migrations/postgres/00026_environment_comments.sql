-- +goose Up
-- An environment may require a comment on every change made there.
ALTER TABLE environments ADD COLUMN require_comment boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE environments DROP COLUMN require_comment;
