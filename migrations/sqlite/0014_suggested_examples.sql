-- A label on a message the labelling queue suggested is told apart from the author's other
-- examples (origin 'suggestion'): suggestions are chosen where the head is unsure or wrong, so
-- they score low out of fold, and the default line is drawn on the examples the author chose.
-- SQLite cannot change a CHECK constraint in place, so the table is rebuilt as it stands after
-- 0009, with the wider CHECK, keeping every row and id.
CREATE TABLE examples_new (
    id             INTEGER PRIMARY KEY,
    validator_key  TEXT    NOT NULL,
    text           TEXT    NOT NULL,
    normalized     TEXT    NOT NULL,
    label          INTEGER NOT NULL CHECK (label IN (0, 1)),
    language       TEXT    NOT NULL,
    origin         TEXT    NOT NULL CHECK (origin IN ('review', 'mark', 'import', 'feedback', 'manual', 'suggestion')),
    verdict_id     INTEGER REFERENCES verdicts (id) ON DELETE SET NULL,
    times_added    INTEGER NOT NULL DEFAULT 1,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    accepted       INTEGER NOT NULL DEFAULT 1 CHECK (accepted IN (0, 1)),
    submitted_by   TEXT,
    UNIQUE (validator_key, normalized, label)
);
INSERT INTO examples_new (id, validator_key, text, normalized, label, language, origin, verdict_id,
                          times_added, created_at, updated_at, accepted, submitted_by)
SELECT id, validator_key, text, normalized, label, language, origin, verdict_id,
       times_added, created_at, updated_at, accepted, submitted_by
FROM examples;
DROP TABLE examples;
ALTER TABLE examples_new RENAME TO examples;
CREATE INDEX examples_by_validator ON examples (validator_key, label);
CREATE INDEX examples_pending ON examples (validator_key) WHERE accepted = 0;
