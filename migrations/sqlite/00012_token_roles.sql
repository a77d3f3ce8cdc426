-- The client and sdk roles: client for browsers, which may only
-- evaluate; sdk for servers that evaluate in process and read the sync API.
-- SQLite cannot change a CHECK constraint: the table is made again.

-- +goose Up
CREATE TABLE tokens_next (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    role       TEXT NOT NULL CHECK (role IN ('admin', 'editor', 'viewer', 'evaluate', 'sdk', 'client')),
    hash       TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    revoked_at TEXT
);
INSERT INTO tokens_next (id, name, role, hash, created_at, revoked_at)
    SELECT id, name, role, hash, created_at, revoked_at FROM tokens;
DROP TABLE tokens;
ALTER TABLE tokens_next RENAME TO tokens;
CREATE UNIQUE INDEX tokens_active_name ON tokens (name) WHERE revoked_at IS NULL;

-- +goose Down
-- sdk tokens become evaluate tokens, which may do the same; client tokens,
-- which no older role fits without granting more, are revoked.
CREATE TABLE tokens_prev (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    role       TEXT NOT NULL CHECK (role IN ('admin', 'editor', 'viewer', 'evaluate')),
    hash       TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    revoked_at TEXT
);
INSERT INTO tokens_prev (id, name, role, hash, created_at, revoked_at)
    SELECT id, name,
           CASE WHEN role IN ('sdk', 'client') THEN 'evaluate' ELSE role END,
           hash, created_at,
           CASE WHEN role = 'client' AND revoked_at IS NULL THEN strftime('%Y-%m-%dT%H:%M:%fZ', 'now') ELSE revoked_at END
    FROM tokens;
DROP TABLE tokens;
ALTER TABLE tokens_prev RENAME TO tokens;
CREATE UNIQUE INDEX tokens_active_name ON tokens (name) WHERE revoked_at IS NULL;
