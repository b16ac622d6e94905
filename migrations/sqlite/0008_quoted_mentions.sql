-- A head's score on a user's question with its quoted passages elided (`quotes: mentioned`), and
-- whether reading the quote as mentioned, not said, is what let it pass.
ALTER TABLE validator_results ADD COLUMN mention_score REAL;
ALTER TABLE validator_results ADD COLUMN read_as_mention INTEGER NOT NULL DEFAULT 0 CHECK (read_as_mention IN (0, 1));
