-- Verdict history: every message checked, its verdict, each validator's result, the exact
-- template text that produced it, reviewers' decisions, and import progress.
-- Times are Unix milliseconds (UTC): cheap to compare, filter and page on.

CREATE TABLE import_batches (
    id           INTEGER PRIMARY KEY,
    file_name    TEXT    NOT NULL,
    -- The same file imported again resumes its batch instead of starting a new one.
    file_sha256  TEXT    NOT NULL UNIQUE,
    total_rows   INTEGER NOT NULL,
    -- Rows handled so far (recorded or refused as bad input) and the last such row number:
    -- advanced in the same transaction as the row's verdict, so progress never runs ahead.
    rows_done    INTEGER NOT NULL DEFAULT 0,
    last_row     INTEGER NOT NULL DEFAULT 0,
    status       TEXT    NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'done')),
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);

CREATE TABLE messages (
    id               INTEGER PRIMARY KEY,
    text             TEXT    NOT NULL,
    source           TEXT    NOT NULL CHECK (source IN ('typed', 'import', 'http', 'cli')),
    user_id          TEXT,
    import_batch_id  INTEGER REFERENCES import_batches (id) ON DELETE SET NULL,
    import_row       INTEGER,
    created_at       INTEGER NOT NULL,
    -- A resumed import can never record the same row twice.
    UNIQUE (import_batch_id, import_row)
);

CREATE TABLE template_versions (
    id             INTEGER PRIMARY KEY,
    validator_key  TEXT    NOT NULL,
    content_hash   TEXT    NOT NULL,
    content        TEXT    NOT NULL,
    created_at     INTEGER NOT NULL,
    UNIQUE (validator_key, content_hash)
);

CREATE TABLE verdicts (
    id                 INTEGER PRIMARY KEY,
    message_id         INTEGER NOT NULL UNIQUE REFERENCES messages (id) ON DELETE CASCADE,
    status             TEXT    NOT NULL CHECK (status IN ('passed', 'failed')),
    case_label         TEXT    NOT NULL,
    rejection_message  TEXT    NOT NULL,
    language           TEXT    NOT NULL,
    model_id           TEXT    NOT NULL,
    model_hash         TEXT    NOT NULL,
    latency_ms         REAL    NOT NULL,
    created_at         INTEGER NOT NULL
);
CREATE INDEX verdicts_by_time ON verdicts (created_at DESC, id DESC);
CREATE INDEX verdicts_by_status ON verdicts (status, created_at DESC, id DESC);

CREATE TABLE validator_results (
    verdict_id           INTEGER NOT NULL REFERENCES verdicts (id) ON DELETE CASCADE,
    validator_key        TEXT    NOT NULL,
    position             INTEGER NOT NULL,
    score                REAL    NOT NULL,
    prompt_score         REAL    NOT NULL,
    learned_score        REAL,
    decided_by           TEXT    NOT NULL CHECK (decided_by IN ('prompt', 'head')),
    threshold            REAL    NOT NULL,
    passed               INTEGER NOT NULL CHECK (passed IN (0, 1)),
    latency_ms           REAL    NOT NULL,
    template_version_id  INTEGER NOT NULL REFERENCES template_versions (id),
    PRIMARY KEY (verdict_id, validator_key)
) WITHOUT ROWID;
CREATE INDEX validator_results_by_key ON validator_results (validator_key, passed, score);

CREATE TABLE reviews (
    id           INTEGER PRIMARY KEY,
    verdict_id   INTEGER NOT NULL REFERENCES verdicts (id) ON DELETE CASCADE,
    reviewer     TEXT    NOT NULL,
    -- On the overall verdict.
    decision     TEXT    NOT NULL CHECK (decision IN ('agree', 'overturn')),
    -- Per validator: a JSON object {"spam": "agree" | "overturn", ...}; keys left out were not judged.
    validator_decisions TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(validator_decisions)),
    note         TEXT    NOT NULL DEFAULT '',
    created_at   INTEGER NOT NULL
);
CREATE INDEX reviews_by_verdict ON reviews (verdict_id);

CREATE TABLE settings (
    key    TEXT PRIMARY KEY,
    value  TEXT NOT NULL
) WITHOUT ROWID;

-- Full-text search over message text. unicode61 folds case and diacritics and splits on
-- punctuation, which suits Indonesian and English alike.
CREATE VIRTUAL TABLE messages_fts USING fts5 (
    text,
    content = 'messages',
    content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts (rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF text ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, text) VALUES ('delete', old.id, old.text);
    INSERT INTO messages_fts (rowid, text) VALUES (new.id, new.text);
END;
-- A verdict's message goes with it: history rows are deleted through verdicts.
CREATE TRIGGER verdicts_delete_message AFTER DELETE ON verdicts BEGIN
    DELETE FROM messages WHERE id = old.message_id;
END;
