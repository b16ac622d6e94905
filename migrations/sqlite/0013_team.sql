-- Who may do what, and what each did. A team names its members with a role each (reviewer <
-- author < admin); while no one is named, the history is a console of one and anyone may do
-- anything, as before. The audit log gets a row in the same transaction as each decision,
-- undo, template save, head applied, queue or retention change, deletion and membership change;
-- triggers refuse to change or remove its rows.
CREATE TABLE members (
    name      TEXT    PRIMARY KEY,
    role      TEXT    NOT NULL CHECK (role IN ('reviewer', 'author', 'admin')),
    added_by  TEXT    NOT NULL,
    -- Unix milliseconds.
    added_at  INTEGER NOT NULL
);

CREATE TABLE audit_log (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    -- Unix milliseconds.
    at       INTEGER NOT NULL,
    -- The member the console or command acted as.
    actor    TEXT    NOT NULL,
    -- The database login that wrote the row (PostgreSQL's session_user); a SQLite file has none.
    login    TEXT    NOT NULL DEFAULT '',
    action   TEXT    NOT NULL,
    -- What was acted on, e.g. "verdict 42", "template toxic", "member rina".
    subject  TEXT    NOT NULL,
    -- What changed, as JSON.
    detail   TEXT    NOT NULL
);
CREATE INDEX audit_log_by_actor ON audit_log (actor, id);

CREATE TRIGGER audit_log_rows_stay BEFORE UPDATE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only');
END;
CREATE TRIGGER audit_log_rows_are_kept BEFORE DELETE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only');
END;
