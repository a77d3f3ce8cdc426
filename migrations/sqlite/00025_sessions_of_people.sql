-- People's dashboard sessions, begun by signing in with single sign-on
-- (OpenID Connect): kept, unlike tokens' sessions, so that admins can list
-- and revoke them. person is the name the audit trail gives (an e-mail
-- address); subject the provider's identifier of the person.

-- +goose Up
CREATE TABLE people_sessions (
    id         TEXT PRIMARY KEY,
    person     TEXT NOT NULL,
    subject    TEXT NOT NULL,
    role       TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    revoked_at TEXT,
    revoked_by TEXT NOT NULL DEFAULT ''
);
CREATE INDEX people_sessions_live ON people_sessions (expires_at);

-- +goose Down
DROP TABLE people_sessions;
