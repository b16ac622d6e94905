-- Every save of a validator template from the console, newest last: the version history a prompt
-- author diffs and reverts. The text itself lives once in template_versions.
CREATE TABLE template_saves (
    id                   INTEGER PRIMARY KEY,
    template_version_id  INTEGER NOT NULL REFERENCES template_versions (id),
    saved_at             INTEGER NOT NULL
);
CREATE INDEX template_saves_by_version ON template_saves (template_version_id);
