-- Evaluations are counted per rule as well: one total per feature, version,
-- rule and hour, the rule being the outcome that served ("" for the ring, an
-- override or the default). The previews of a change of rules estimate from
-- them how many evaluations a day a population gets. hour is as in
-- exposures (Unix seconds of the start of the UTC hour). The counts per
-- bucket (exposures) are unchanged.

-- +goose Up
CREATE TABLE rule_exposures (
    feature_id text    NOT NULL REFERENCES features (id) ON DELETE CASCADE,
    version    integer NOT NULL CHECK (version >= 1),
    rule       text    NOT NULL,
    hour       bigint  NOT NULL,
    count      bigint  NOT NULL CHECK (count >= 0),
    PRIMARY KEY (feature_id, version, rule, hour)
);

-- +goose Down
DROP TABLE rule_exposures;
