-- A shared review queue: a reviewer claims a batch of queued verdicts, and holds each until they
-- decide it, release it, or the claim expires (a console that died mid-batch gives its messages
-- back to the team this way). One claim per reviewer and verdict; how many reviewers a verdict
-- wants (one, or two for the overlap share that measures agreement) is read from the queue's
-- settings, so that a verdict is never decided by more reviewers than it wants.
CREATE TABLE review_claims (
    verdict_id  INTEGER NOT NULL REFERENCES verdicts (id) ON DELETE CASCADE,
    reviewer    TEXT    NOT NULL,
    claimed_at  INTEGER NOT NULL,
    -- Unix milliseconds; a claim past this holds nothing and is swept by the next claim.
    expires_at  INTEGER NOT NULL,
    PRIMARY KEY (verdict_id, reviewer)
);
CREATE INDEX review_claims_by_expiry ON review_claims (expires_at);
CREATE INDEX reviews_by_reviewer ON reviews (reviewer, verdict_id);

-- What the queue orders and filters by, kept on the verdict so that claiming reads an index
-- rather than every result: the smallest distance of any validator's score from its threshold
-- (1 where there were no results), and whether the verdict has the reviewers it wanted when it
-- was last decided (a later change of the overlap share applies to decisions from then on).
ALTER TABLE verdicts ADD COLUMN uncertainty REAL NOT NULL DEFAULT 1;
ALTER TABLE verdicts ADD COLUMN review_done INTEGER NOT NULL DEFAULT 0 CHECK (review_done IN (0, 1));
UPDATE verdicts SET uncertainty = COALESCE(
    (SELECT min(abs(r.score - r.threshold)) FROM validator_results r WHERE r.verdict_id = verdicts.id), 1);
UPDATE verdicts SET review_done = 1 WHERE EXISTS (SELECT 1 FROM reviews rv WHERE rv.verdict_id = verdicts.id);
CREATE INDEX verdicts_awaiting_review ON verdicts (uncertainty, id DESC) WHERE review_done = 0;
