-- People's dashboard sessions, begun by signing in with single sign-on
-- (OpenID Connect): kept, unlike tokens' sessions, so that admins can list
-- and revoke them. person is the name the audit trail gives (an e-mail
-- address); subject the provider's identifier of the person.

-- +goose Up
CREATE TABLE people_sessions (
    id         text        PRIMARY KEY,
    person     text        NOT NULL,
    subject    text        NOT NULL,
    role       text        NOT NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz,
    revoked_by text        NOT NULL DEFAULT ''
);
CREATE INDEX people_sessions_live ON people_sessions (expires_at);

-- +goose Down
DROP TABLE people_sessions;
