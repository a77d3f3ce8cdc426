-- The Idempotency-Key of each change request, with its first answer, so that
-- a retry of the request (after a lost answer, on any instance) returns that
-- answer and changes nothing again. A key is the token's own (scope: the
-- token's ID, '' on an open server). A claimed key is pending while its
-- request runs, held by one attempt until lease_until; the change's own
-- transaction marks it done with the answer, so that either both are
-- committed or neither. Rows whose expires_at has passed (at least
-- rollout.IdempotencyMemory after they were answered) are deleted by the
-- expiry sweep.

-- +goose Up
CREATE TABLE idempotency_keys (
    scope       text        NOT NULL,
    key         text        NOT NULL,
    fingerprint text        NOT NULL,
    attempt     text        NOT NULL,
    done        boolean     NOT NULL DEFAULT false,
    answer      bytea,
    lease_until timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (scope, key)
);
CREATE INDEX idempotency_keys_expires_at ON idempotency_keys (expires_at);

-- +goose Down
DROP TABLE idempotency_keys;
