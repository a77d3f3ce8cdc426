-- API tokens: only the SHA-256 of each secret is kept. A name is unique
-- among active (not revoked) tokens.

-- +goose Up
CREATE TABLE tokens (
    id         text        PRIMARY KEY,
    name       text        NOT NULL,
    role       text        NOT NULL CHECK (role IN ('admin', 'editor', 'viewer', 'evaluate')),
    hash       text        NOT NULL UNIQUE,
    created_at timestamptz NOT NULL,
    revoked_at timestamptz
);
CREATE UNIQUE INDEX tokens_active_name ON tokens (name) WHERE revoked_at IS NULL;

-- +goose Down
DROP TABLE tokens;
