-- A delivery's error is the reason in the server's own words ("HTTP 404",
-- "timeout"), which the pause of a webhook repeats where viewers read it;
-- detail is what the endpoint answered, for the admins' delivery log only.

-- +goose Up
ALTER TABLE webhook_deliveries ADD COLUMN detail TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE webhook_deliveries DROP COLUMN detail;
