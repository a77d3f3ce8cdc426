-- The users of user-list segments (feature.Segment.List), a row each, so
-- that an edit of a list of 100,000 writes the users it adds and removes
-- rather than the whole list. A segment's configuration keeps its size.

-- +goose Up
CREATE TABLE segment_users (
    segment_key text NOT NULL REFERENCES segments (key) ON DELETE CASCADE,
    user_id     text NOT NULL,
    PRIMARY KEY (segment_key, user_id)
);

-- +goose Down
DROP TABLE segment_users;
