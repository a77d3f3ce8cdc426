-- Change requests (rollout.Request): an editor's change kept, with its
-- preview, until another person approves (applies) or rejects it, or its
-- author cancels it. The request itself is the JSON in body; the columns
-- are what lists, the per-author cap and the open → decided update need.
-- The organisation's settings (rollout.Settings) are the row named
-- 'organisation' of the settings table (00004), as JSON.

-- +goose Up
CREATE TABLE change_requests (
    id          text        PRIMARY KEY,
    feature_key text        NOT NULL,
    state       text        NOT NULL CHECK (state IN ('open', 'applied', 'rejected', 'canceled')),
    author      text        NOT NULL,
    body        text        NOT NULL,
    created_at  timestamptz NOT NULL
);
CREATE INDEX change_requests_state ON change_requests (state, created_at);
CREATE INDEX change_requests_feature ON change_requests (feature_key, created_at);
CREATE INDEX change_requests_author ON change_requests (author, state);

-- +goose Down
DROP TABLE change_requests;
DELETE FROM settings WHERE name = 'organisation';
