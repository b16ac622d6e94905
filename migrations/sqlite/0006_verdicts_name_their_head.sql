-- Verdicts record the head version that decided each validator, as they record the template
-- version: the sha256 of the head file's bytes, the `content_hash` of its row in head_versions
-- (which can hold the same bytes more than once, after a revert). NULL where the prompt decided,
-- and for verdicts recorded before this migration.
ALTER TABLE validator_results ADD COLUMN head_hash TEXT;
