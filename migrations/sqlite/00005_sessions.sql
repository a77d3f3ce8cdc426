-- Dashboard sessions that signed out, kept until they would have expired,
-- so that a copy of a signed-out session's cookie works on no instance.

-- +goose Up
CREATE TABLE ended_sessions (
    id         TEXT PRIMARY KEY,
    expires_at TEXT NOT NULL
);

-- +goose Down
DROP TABLE ended_sessions;
