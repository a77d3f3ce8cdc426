-- Segments (rollout.Segment): named sets of conditions that features'
-- rules use, with their history; and commits of kind 'segment' in the
-- change feed.

-- +goose Up
CREATE TABLE segments (
    key        text        PRIMARY KEY,
    version    integer     NOT NULL CHECK (version >= 1),
    config     text        NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

CREATE TABLE segment_versions (
    segment_key text        NOT NULL REFERENCES segments (key) ON DELETE CASCADE,
    version     integer     NOT NULL CHECK (version >= 1),
    actor       text        NOT NULL,
    created_at  timestamptz NOT NULL,
    summary     text        NOT NULL,
    comment     text        NOT NULL DEFAULT '',
    config      text        NOT NULL,
    PRIMARY KEY (segment_key, version)
);

ALTER TABLE commits DROP CONSTRAINT commits_kind_check;
ALTER TABLE commits ADD CONSTRAINT commits_kind_check CHECK (kind IN ('feature', 'token', 'segment'));

-- +goose Down
-- Segment commits become no-op feature commits of no feature: readers of
-- the feed reload a feature that does not exist, which changes nothing.
UPDATE commits SET kind = 'feature', key = 'segment:' || key WHERE kind = 'segment';
ALTER TABLE commits DROP CONSTRAINT commits_kind_check;
ALTER TABLE commits ADD CONSTRAINT commits_kind_check CHECK (kind IN ('feature', 'token'));
DROP TABLE segment_versions;
DROP TABLE segments;
