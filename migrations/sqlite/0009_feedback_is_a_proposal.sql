-- An example a client sends to the HTTP API's /feedback is a proposal: it is not trained on until a
-- reviewer accepts it (the Teach view, `aegis examples accept`). A reviewer's own examples (marks,
-- reviews, imports, typed ones) are accepted as they are made. `submitted_by` names the client's
-- address, so a flood of proposals can be traced and removed. Feedback stored before this change
-- came from callers no one vetted, so it becomes pending too.
ALTER TABLE examples ADD COLUMN accepted INTEGER NOT NULL DEFAULT 1 CHECK (accepted IN (0, 1));
ALTER TABLE examples ADD COLUMN submitted_by TEXT;
UPDATE examples SET accepted = 0 WHERE origin = 'feedback';
CREATE INDEX examples_pending ON examples (validator_key) WHERE accepted = 0;
