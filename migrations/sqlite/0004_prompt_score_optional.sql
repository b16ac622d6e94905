-- A validator decided by a learned head no longer runs its own prompt unless asked to (the
-- message is encoded once and every head reads that), so its prompt score may be absent.
-- SQLite cannot drop NOT NULL in place: the table is rebuilt with the same rows.
CREATE TABLE validator_results_new (
    verdict_id           INTEGER NOT NULL REFERENCES verdicts (id) ON DELETE CASCADE,
    validator_key        TEXT    NOT NULL,
    position             INTEGER NOT NULL,
    score                REAL    NOT NULL,
    prompt_score         REAL,
    learned_score        REAL,
    decided_by           TEXT    NOT NULL CHECK (decided_by IN ('prompt', 'head')),
    threshold            REAL    NOT NULL,
    passed               INTEGER NOT NULL CHECK (passed IN (0, 1)),
    latency_ms           REAL    NOT NULL,
    template_version_id  INTEGER NOT NULL REFERENCES template_versions (id),
    PRIMARY KEY (verdict_id, validator_key)
) WITHOUT ROWID;
INSERT INTO validator_results_new
    SELECT verdict_id, validator_key, position, score, prompt_score, learned_score, decided_by,
           threshold, passed, latency_ms, template_version_id
    FROM validator_results;
DROP TABLE validator_results;
ALTER TABLE validator_results_new RENAME TO validator_results;
CREATE INDEX validator_results_by_key ON validator_results (validator_key, passed, score);
