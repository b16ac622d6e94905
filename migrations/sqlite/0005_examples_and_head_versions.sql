-- Labelled examples a prompt author teaches a validator with: from a reviewer's decision, a
-- "should fail / should pass" mark, an imported labelled file, the HTTP API's feedback or the
-- command line. One row per validator, text (compared with whitespace collapsed) and label: adding
-- the same again merges into it and counts it. The same text with both labels is two rows, a
-- contradiction the Teach view shows rather than resolves.
CREATE TABLE examples (
    id             INTEGER PRIMARY KEY,
    validator_key  TEXT    NOT NULL,
    text           TEXT    NOT NULL,
    normalized     TEXT    NOT NULL,
    label          INTEGER NOT NULL CHECK (label IN (0, 1)),
    language       TEXT    NOT NULL,
    origin         TEXT    NOT NULL CHECK (origin IN ('review', 'mark', 'import', 'feedback', 'manual')),
    verdict_id     INTEGER REFERENCES verdicts (id) ON DELETE SET NULL,
    times_added    INTEGER NOT NULL DEFAULT 1,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    UNIQUE (validator_key, normalized, label)
);
CREATE INDEX examples_by_validator ON examples (validator_key, label);

-- Every head applied to a validator, newest last: the file byte for byte (so a revert restores it
-- exactly), its training figures as JSON and the hash of the data it was trained on.
CREATE TABLE head_versions (
    id             INTEGER PRIMARY KEY,
    validator_key  TEXT    NOT NULL,
    content_hash   TEXT    NOT NULL,
    content        BLOB    NOT NULL,
    data_sha256    TEXT    NOT NULL,
    metrics        TEXT    NOT NULL,
    note           TEXT    NOT NULL DEFAULT '',
    applied_at     INTEGER NOT NULL
);
CREATE INDEX head_versions_by_validator ON head_versions (validator_key, id);
