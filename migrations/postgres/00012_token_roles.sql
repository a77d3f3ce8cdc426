-- The client and sdk roles: client for browsers, which may only
-- evaluate; sdk for servers that evaluate in process and read the sync API.

-- +goose Up
ALTER TABLE tokens DROP CONSTRAINT tokens_role_check;
ALTER TABLE tokens ADD CONSTRAINT tokens_role_check
    CHECK (role IN ('admin', 'editor', 'viewer', 'evaluate', 'sdk', 'client'));

-- +goose Down
-- sdk tokens become evaluate tokens, which may do the same; client tokens,
-- which no older role fits without granting more, are revoked.
UPDATE tokens SET revoked_at = now() WHERE role = 'client' AND revoked_at IS NULL;
UPDATE tokens SET role = 'evaluate' WHERE role IN ('sdk', 'client');
ALTER TABLE tokens DROP CONSTRAINT tokens_role_check;
ALTER TABLE tokens ADD CONSTRAINT tokens_role_check
    CHECK (role IN ('admin', 'editor', 'viewer', 'evaluate'));
