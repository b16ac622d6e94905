-- A label on a message the labelling queue suggested is told apart from the author's other
-- examples (origin 'suggestion'): suggestions are chosen where the head is unsure or wrong, so
-- they score low out of fold, and the default line is drawn on the examples the author chose.
-- (SQLite's 0014 rebuilds its table for the same change.)
ALTER TABLE examples DROP CONSTRAINT examples_origin_check;
ALTER TABLE examples ADD CONSTRAINT examples_origin_check
    CHECK (origin IN ('review', 'mark', 'import', 'feedback', 'manual', 'suggestion'));
