//! The ways a validator's head reads a turn. Every head on the sentence encoder reads the turn
//! as written; a [`Reading`] is a second text the encoder reads for the same turn (the turn
//! joined to its context, a user's report with its quotes elided) and a rule for how its score
//! meets the score so far. A verdict lists every reading a validator made, which one decided, and
//! which turned the decision, so a new reading is this trait, its place in
//! [`Guard::readings`](crate::Guard), and its test: the store, the API and the screens carry the
//! list as it comes.

use serde::{Deserialize, Serialize};

use crate::context::{joined_text, ContextReading};
use crate::exclamation::{without_exclamation, ExclamationReading};
use crate::input::{Role, Turn};
use crate::mention::quoted_frame;
use crate::template::Validator;

/// The turn as written: the reading every head makes first.
pub const TURN_READING: &str = "turn";
/// The turn joined to the earlier turns read with it ([`ContextReading`]).
pub const IN_CONTEXT: &str = "in_context";
/// A user's question or report with its quoted passages elided
/// ([`QuoteReading`](crate::QuoteReading)).
pub const QUOTES_ELIDED: &str = "quotes_elided";
/// A user's turn without its opening exclamation ([`ExclamationReading`]).
pub const EXCLAMATION_ELIDED: &str = "exclamation_elided";

/// How a reading's score meets the score so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Combine {
    /// The lower decides: a reading that can only clear a turn.
    Lower,
    /// The higher decides: a reading that can only catch one.
    Higher,
    /// This reading's score decides in place of the score so far.
    Instead,
}

/// What a reading sees of the checked turn.
#[derive(Debug, Clone, Copy)]
pub struct TurnToRead<'a> {
    pub text: &'a str,
    pub role: Role,
    /// The earlier turns read with it, oldest first (already fitted to the context budget).
    pub context: &'a [Turn],
}

/// A second way of reading a turn for the heads on the sentence encoder.
pub trait Reading: Send + Sync {
    /// Its name in verdicts, history and the API (`snake_case`, stable: history keeps it).
    fn name(&self) -> &'static str;

    /// How `validator`'s head takes this reading of `turn`, or `None` where it does not read it.
    fn combine(&self, validator: &Validator, turn: &TurnToRead<'_>) -> Option<Combine>;

    /// The text the encoder reads, asked only where some validator reads it; `None` where the
    /// turn gives nothing to read.
    fn text(&self, turn: &TurnToRead<'_>) -> Option<String>;
}

/// One reading of the turn by a validator's head, and its part in the decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReadingScore {
    /// [`TURN_READING`], [`IN_CONTEXT`], [`QUOTES_ELIDED`], or a reading added since.
    pub reading: String,
    /// The head's calibrated probability on this reading.
    pub score: f32,
    /// This score is the validator's learned score.
    pub decided: bool,
    /// Without this reading the validator would have come out the other way: failed where it
    /// passed (a quote read as mentioned), or passed where it failed (caught in context).
    pub turned: bool,
}

/// The reading named `name` in `readings`, where it was made.
pub fn find_reading<'a>(readings: &'a [ReadingScore], name: &str) -> Option<&'a ReadingScore> {
    readings.iter().find(|r| r.reading == name)
}

/// The turn joined to its context, where the validator reads context (its `context:` front
/// matter, or the guard's override for measuring).
pub(crate) struct InContext {
    pub forced: Option<ContextReading>,
}

impl Reading for InContext {
    fn name(&self) -> &'static str {
        IN_CONTEXT
    }

    fn combine(&self, validator: &Validator, turn: &TurnToRead<'_>) -> Option<Combine> {
        if turn.context.is_empty() {
            return None;
        }
        match self.forced.unwrap_or(validator.context_reading) {
            ContextReading::Turn => None,
            ContextReading::Joined => Some(Combine::Instead),
            ContextReading::Higher => Some(Combine::Higher),
        }
    }

    fn text(&self, turn: &TurnToRead<'_>) -> Option<String> {
        (!turn.context.is_empty()).then(|| joined_text(turn.context, turn.text))
    }
}

/// A user's question or report without its quoted passages (see `mention.rs`): the lower score
/// decides, so a quote asked about or reported is not read as said.
pub(crate) struct QuotesElided;

impl Reading for QuotesElided {
    fn name(&self) -> &'static str {
        QUOTES_ELIDED
    }

    fn combine(&self, validator: &Validator, turn: &TurnToRead<'_>) -> Option<Combine> {
        if turn.role != Role::User {
            return None;
        }
        let frame = quoted_frame(turn.text)?;
        validator
            .quote_reading
            .reads(frame.is_question)
            .then_some(Combine::Lower)
    }

    fn text(&self, turn: &TurnToRead<'_>) -> Option<String> {
        (turn.role == Role::User)
            .then(|| quoted_frame(turn.text))
            .flatten()
            .map(|frame| frame.text)
    }
}

/// A user's turn without its opening exclamation (see `exclamation.rs`): the lower score
/// decides, so swearing at one's luck is not read as swearing at someone.
pub(crate) struct ExclamationElided;

impl Reading for ExclamationElided {
    fn name(&self) -> &'static str {
        EXCLAMATION_ELIDED
    }

    fn combine(&self, validator: &Validator, turn: &TurnToRead<'_>) -> Option<Combine> {
        (turn.role == Role::User
            && validator.exclamation_reading == ExclamationReading::Elided
            && without_exclamation(turn.text).is_some())
        .then_some(Combine::Lower)
    }

    fn text(&self, turn: &TurnToRead<'_>) -> Option<String> {
        (turn.role == Role::User)
            .then(|| without_exclamation(turn.text))
            .flatten()
    }
}

/// The learned score from the turn's own score and the other readings' in order, and the
/// position (0: the turn; k: `others[k - 1]`) of the reading whose score it is. `skip` leaves
/// one of `others` out.
fn fold(turn: f32, others: &[(Combine, f32)], skip: Option<usize>) -> (f32, usize) {
    let mut decided = (turn, 0);
    for (k, &(combine, score)) in others.iter().enumerate() {
        if skip == Some(k) {
            continue;
        }
        let takes = match combine {
            Combine::Lower => score < decided.0,
            Combine::Higher => score > decided.0,
            Combine::Instead => true,
        };
        if takes {
            decided = (score, k + 1);
        }
    }
    decided
}

/// Every reading's score with its part in the decision, and the learned score: the turn's own
/// score first, then `others` by name with how each combines, against `threshold`.
pub(crate) fn decide(
    turn: f32,
    others: &[(&str, Combine, f32)],
    threshold: f32,
) -> (f32, Vec<ReadingScore>) {
    let steps: Vec<(Combine, f32)> = others.iter().map(|&(_, c, p)| (c, p)).collect();
    let fails = |p: f32| p >= threshold;
    let (learned, decided) = fold(turn, &steps, None);
    let mut readings = vec![ReadingScore {
        reading: TURN_READING.to_string(),
        score: turn,
        decided: decided == 0,
        turned: false,
    }];
    for (k, &(name, _, score)) in others.iter().enumerate() {
        let (without, _) = fold(turn, &steps, Some(k));
        readings.push(ReadingScore {
            reading: name.to_string(),
            score,
            decided: decided == k + 1,
            turned: fails(learned) != fails(without),
        });
    }
    (learned, readings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(readings: &[ReadingScore], pick: impl Fn(&ReadingScore) -> bool) -> Vec<&str> {
        readings
            .iter()
            .filter(|r| pick(r))
            .map(|r| r.reading.as_str())
            .collect()
    }

    #[test]
    fn the_turn_alone_decides_itself() {
        let (learned, readings) = decide(0.7, &[], 0.5);
        assert_eq!(learned, 0.7);
        assert_eq!(readings.len(), 1);
        assert!(readings[0].decided && !readings[0].turned);
    }

    #[test]
    fn a_quote_read_as_mentioned_clears_a_turn_and_says_it_turned_it() {
        let (learned, readings) = decide(0.9, &[(QUOTES_ELIDED, Combine::Lower, 0.1)], 0.5);
        assert_eq!(learned, 0.1);
        assert_eq!(names(&readings, |r| r.decided), [QUOTES_ELIDED]);
        assert_eq!(names(&readings, |r| r.turned), [QUOTES_ELIDED]);
        // Lower but still failing: it decides, and turns nothing.
        let (_, readings) = decide(0.9, &[(QUOTES_ELIDED, Combine::Lower, 0.6)], 0.5);
        assert!(readings[1].decided && !readings[1].turned);
    }

    #[test]
    fn a_higher_context_catches_a_turn_that_passes_alone() {
        let (learned, readings) = decide(0.2, &[(IN_CONTEXT, Combine::Higher, 0.8)], 0.5);
        assert_eq!(learned, 0.8);
        assert_eq!(names(&readings, |r| r.turned), [IN_CONTEXT]);
        // A lower context score does not clear a turn that fails alone.
        let (learned, readings) = decide(0.8, &[(IN_CONTEXT, Combine::Higher, 0.1)], 0.5);
        assert_eq!(learned, 0.8);
        assert_eq!(names(&readings, |r| r.decided), [TURN_READING]);
    }

    #[test]
    fn a_joined_context_decides_in_place_of_the_turn() {
        let (learned, readings) = decide(0.9, &[(IN_CONTEXT, Combine::Instead, 0.3)], 0.5);
        assert_eq!(learned, 0.3);
        assert_eq!(names(&readings, |r| r.turned), [IN_CONTEXT]);
    }

    #[test]
    fn readings_meet_in_order_and_each_says_whether_it_turned_the_decision() {
        // The quote clears the turn (0.9 → 0.2); the context, read higher, stays below the line.
        let others = [
            (QUOTES_ELIDED, Combine::Lower, 0.2),
            (IN_CONTEXT, Combine::Higher, 0.4),
        ];
        let (learned, readings) = decide(0.9, &others, 0.5);
        assert_eq!(learned, 0.4);
        assert_eq!(names(&readings, |r| r.decided), [IN_CONTEXT]);
        // Without the quote's reading the turn's 0.9 stands; without the context's, 0.2 passes.
        assert_eq!(names(&readings, |r| r.turned), [QUOTES_ELIDED]);
    }
}
