-- Each reading a validator's head made of the checked turn (the turn as written, the turn in its
-- context, a user's report with its quotes elided, and any added since), with which one decided
-- and which turned the decision, in one table: a new reading needs no new column. The columns
-- migrations 0007 and 0008 added for two readings are folded in and dropped.
CREATE TABLE validator_readings (
    verdict_id     INTEGER NOT NULL,
    validator_key  TEXT    NOT NULL,
    position       INTEGER NOT NULL,
    reading        TEXT    NOT NULL,
    score          REAL    NOT NULL,
    decided        INTEGER NOT NULL CHECK (decided IN (0, 1)),
    turned         INTEGER NOT NULL CHECK (turned IN (0, 1)),
    PRIMARY KEY (verdict_id, validator_key, position),
    FOREIGN KEY (verdict_id, validator_key)
        REFERENCES validator_results (verdict_id, validator_key) ON DELETE CASCADE
) WITHOUT ROWID;

-- Older rows kept the turn's own score only where no other reading was made; elsewhere the
-- learned score is the one another reading decided, so those rows list only what they kept.
INSERT INTO validator_readings (verdict_id, validator_key, position, reading, score, decided, turned)
SELECT verdict_id, validator_key, 0, 'turn', learned_score, 1, 0
  FROM validator_results
 WHERE decided_by = 'head' AND learned_score IS NOT NULL
   AND mention_score IS NULL AND context_score IS NULL;

INSERT INTO validator_readings (verdict_id, validator_key, position, reading, score, decided, turned)
SELECT verdict_id, validator_key, 1, 'quotes_elided', mention_score,
       learned_score IS NOT NULL AND mention_score = learned_score, read_as_mention
  FROM validator_results
 WHERE mention_score IS NOT NULL;

INSERT INTO validator_readings (verdict_id, validator_key, position, reading, score, decided, turned)
SELECT verdict_id, validator_key, 2, 'in_context', context_score,
       learned_score IS NOT NULL AND context_score = learned_score
           AND NOT coalesce(mention_score = learned_score, 0),
       caught_in_context
  FROM validator_results
 WHERE context_score IS NOT NULL;

ALTER TABLE validator_results DROP COLUMN context_score;
ALTER TABLE validator_results DROP COLUMN caught_in_context;
ALTER TABLE validator_results DROP COLUMN mention_score;
ALTER TABLE validator_results DROP COLUMN read_as_mention;
