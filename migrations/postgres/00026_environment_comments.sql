-- +goose Up
-- An environment may require a comment on every change made there.
ALTER TABLE environments ADD COLUMN require_comment boolean NOT NULL DEFAULT false;

-- A person's session may be scoped to one environment, as a token is (its
-- role granted there alone); NULL: every environment.
ALTER TABLE people_sessions ADD COLUMN environment text;

-- +goose Down
ALTER TABLE people_sessions DROP COLUMN environment;
ALTER TABLE environments DROP COLUMN require_comment;
