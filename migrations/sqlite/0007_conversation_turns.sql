-- A checked message may be one turn of a conversation: who wrote it, where it stood, and the
-- earlier turns the guard read with it (a JSON array of {"role", "content"}, oldest first), with
-- the number of older turns cut to fit the context budget. A lone message is a user's turn 0.
ALTER TABLE messages ADD COLUMN role TEXT NOT NULL DEFAULT 'user' CHECK (role IN ('user', 'assistant'));
ALTER TABLE messages ADD COLUMN turn_index INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN context TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(context));
ALTER TABLE messages ADD COLUMN context_cut INTEGER NOT NULL DEFAULT 0;
-- A head's score on the turn joined to its context, and whether the context alone made it fail.
ALTER TABLE validator_results ADD COLUMN context_score REAL;
ALTER TABLE validator_results ADD COLUMN caught_in_context INTEGER NOT NULL DEFAULT 0 CHECK (caught_in_context IN (0, 1));
