-- Who may do what, and what each did. A team names its members with a role each (reviewer <
-- author < admin); while no one is named, the history is a console of one and anyone may do
-- anything, as before. The audit log gets a row in the same transaction as each decision,
-- undo, template save, head applied, queue or retention change, deletion and membership change;
-- triggers refuse to change, remove or truncate its rows, and each row names the database login
-- that wrote it, which a member's name typed into a console cannot forge.
CREATE TABLE members (
    name      TEXT    PRIMARY KEY,
    role      TEXT    NOT NULL CHECK (role IN ('reviewer', 'author', 'admin')),
    added_by  TEXT    NOT NULL,
    -- Unix milliseconds.
    added_at  BIGINT  NOT NULL
);

CREATE TABLE audit_log (
    id       BIGSERIAL PRIMARY KEY,
    -- Unix milliseconds.
    at       BIGINT  NOT NULL,
    -- The member the console or command acted as.
    actor    TEXT    NOT NULL,
    -- The database login that wrote the row.
    login    TEXT    NOT NULL DEFAULT session_user,
    action   TEXT    NOT NULL,
    -- What was acted on, e.g. "verdict 42", "template toxic", "member rina".
    subject  TEXT    NOT NULL,
    -- What changed, as JSON.
    detail   TEXT    NOT NULL
);
CREATE INDEX audit_log_by_actor ON audit_log (actor, id);

CREATE FUNCTION audit_log_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the audit log is append-only';
END
$$;
CREATE TRIGGER audit_log_rows_stay BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_refuse_change();
CREATE TRIGGER audit_log_is_kept BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_refuse_change();
