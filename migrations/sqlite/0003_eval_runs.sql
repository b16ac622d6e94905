-- Evaluation runs: a labelled dataset scored by the guard. Every run keeps its per-message scores
-- so a threshold can be moved, or two runs compared, without running the model again; and the
-- template versions it used, so metrics can be followed across edits.
CREATE TABLE eval_runs (
    id              INTEGER PRIMARY KEY,
    created_at      INTEGER NOT NULL,
    dataset_name    TEXT    NOT NULL,
    -- sha256 of the dataset file plus the sample taken: two runs compare only when both match.
    dataset_sha256  TEXT    NOT NULL,
    file_rows       INTEGER NOT NULL,
    sample_limit    INTEGER,
    sample_seed     TEXT,
    model_id        TEXT    NOT NULL,
    model_hash      TEXT    NOT NULL,
    templates_from  TEXT    NOT NULL,
    -- Headline metrics at the run's thresholds (per validator, overall and per language), JSON.
    summary         TEXT    NOT NULL CHECK (json_valid(summary))
);
CREATE INDEX eval_runs_by_dataset ON eval_runs (dataset_sha256, created_at DESC);

CREATE TABLE eval_run_templates (
    run_id               INTEGER NOT NULL REFERENCES eval_runs (id) ON DELETE CASCADE,
    position             INTEGER NOT NULL,
    validator_key        TEXT    NOT NULL,
    name                 TEXT    NOT NULL,
    template_version_id  INTEGER NOT NULL REFERENCES template_versions (id),
    threshold            REAL    NOT NULL,
    scored_by            TEXT    NOT NULL CHECK (scored_by IN ('prompt', 'head')),
    PRIMARY KEY (run_id, validator_key)
) WITHOUT ROWID;

CREATE TABLE eval_rows (
    run_id       INTEGER NOT NULL REFERENCES eval_runs (id) ON DELETE CASCADE,
    row_number   INTEGER NOT NULL,
    external_id  TEXT,
    text         TEXT    NOT NULL,
    lang         TEXT    NOT NULL,
    -- {"spam": true | false | null, ...}
    labels       TEXT    NOT NULL CHECK (json_valid(labels)),
    -- {"spam": 0.93, ...}; empty when the guard gave no verdict.
    scores       TEXT    NOT NULL CHECK (json_valid(scores)),
    error        TEXT,
    PRIMARY KEY (run_id, row_number)
) WITHOUT ROWID;
