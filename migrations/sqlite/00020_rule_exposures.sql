-- Evaluations are counted per rule as well: one total per feature, version,
-- rule and hour, the rule being the outcome that served ("" for the ring, an
-- override or the default). The previews of a change of rules estimate from
-- them how many evaluations a day a population gets. hour is as in
-- exposures (Unix seconds of the start of the UTC hour). The counts per
-- bucket (exposures) are unchanged.

-- +goose Up
CREATE TABLE rule_exposures (
    feature_id TEXT    NOT NULL REFERENCES features (id) ON DELETE CASCADE,
    version    INTEGER NOT NULL CHECK (version BETWEEN 1 AND 2147483647),
    rule       TEXT    NOT NULL,
    hour       INTEGER NOT NULL,
    count      INTEGER NOT NULL CHECK (typeof(count) = 'integer' AND count >= 0),
    PRIMARY KEY (feature_id, version, rule, hour)
);

-- +goose Down
DROP TABLE rule_exposures;
