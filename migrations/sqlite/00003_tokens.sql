-- API tokens: only the SHA-256 of each secret is kept. A name is unique
-- among active (not revoked) tokens.

-- +goose Up
CREATE TABLE tokens (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    role       TEXT NOT NULL CHECK (role IN ('admin', 'editor', 'viewer', 'evaluate')),
    hash       TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    revoked_at TEXT
);
CREATE UNIQUE INDEX tokens_active_name ON tokens (name) WHERE revoked_at IS NULL;

-- +goose Down
DROP TABLE tokens;
