-- Verdicts record the sentence encoder the heads read, as they record the model: its id (the
-- folder's name, or the model an encoder server serves) and its content hash (the weights'
-- sha256, or the server's URL). NULL where no encoder was loaded (heads on the model's hidden
-- states, or prompts only), and for verdicts recorded before this migration.
ALTER TABLE verdicts ADD COLUMN encoder_id TEXT;
ALTER TABLE verdicts ADD COLUMN encoder_hash TEXT;
