//! How a checked turn's context is read: which earlier turns fit the budget (cut from the oldest,
//! and the cut reported), and what the heads read of them.

use serde::{Deserialize, Serialize};

use crate::input::{EarlierTurns, Role, Turn};

/// At most this many tokens of earlier turns go with a checked turn: the encoder reads the turn
/// and its context in one window, and a few recent turns carry what a verdict needs.
pub const DEFAULT_CONTEXT_TOKENS: usize = 384;

/// What a validator's head reads of a turn that has context (`context:` in its front matter).
/// Each shipped validator's choice was measured on held-out conversations (README,
/// "Conversations").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum ContextReading {
    /// The turn alone, as the heads were trained; context reaches only templates with
    /// `{{context}}`.
    #[default]
    Turn,
    /// The context and the turn as one text.
    Joined,
    /// The higher of the two scores: a turn that fails alone still fails, and one that fails
    /// only after its context is caught too.
    Higher,
}

impl std::str::FromStr for ContextReading {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "turn" => Ok(Self::Turn),
            "joined" => Ok(Self::Joined),
            "higher" => Ok(Self::Higher),
            other => Err(format!(
                "unknown context reading {other:?}: use turn, joined or higher"
            )),
        }
    }
}

/// The checked turn as its verdict reports it: where it stood, who wrote it, and the context
/// that was read with it.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct TurnReport {
    /// Its position in the conversation, from 0 (a lone message is turn 0).
    pub index: usize,
    pub role: Role,
    /// The earlier turns read with it, oldest first.
    #[cfg_attr(feature = "ts", ts(as = "Vec<Turn>"))]
    pub context: EarlierTurns,
    /// Earlier turns left out, oldest first, because the context was over its budget.
    pub context_cut: usize,
}

/// The newest turns of `context` whose tokens (by `count`) fit in `budget`, and how many older
/// turns were cut. A turn is kept whole or cut whole, so the reader never sees half a sentence.
pub fn fit_context(
    context: &EarlierTurns,
    budget: usize,
    count: impl Fn(&str) -> usize,
) -> (EarlierTurns, usize) {
    let mut used = 0;
    let mut kept = 0;
    for turn in context.iter().rev() {
        // A few tokens more for the line break, and the `role: ` label a prompt's `{{context}}`
        // writes before each turn (the encoder's joined text has only the line break).
        let cost = count(&turn.content) + 4;
        if used + cost > budget {
            break;
        }
        used += cost;
        kept += 1;
    }
    let cut = context.len() - kept;
    (context.without_oldest(cut), cut)
}

/// The text a head reads for a turn in its context: the earlier turns, then the turn, one a line.
/// It is read as plain text, so nothing in any turn becomes a control token.
pub fn joined_text(context: &[Turn], turn: &str) -> String {
    let mut text = String::new();
    for earlier in context {
        text.push_str(earlier.content.trim());
        text.push('\n');
    }
    text.push_str(turn);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> usize {
        text.split_whitespace().count()
    }

    #[test]
    fn the_context_is_cut_from_the_oldest_turn_and_the_cut_counted() {
        let context = EarlierTurns::from(vec![
            Turn::user("one two three four five six"),
            Turn::assistant("seven eight"),
            Turn::user("nine"),
        ]);
        let (kept, cut) = fit_context(&context, 11, words);
        assert_eq!(kept, context[1..]);
        assert_eq!(
            kept.without_oldest(5).len(),
            0,
            "cutting more than there is leaves none"
        );
        assert_eq!(cut, 1);
        let (all, none_cut) = fit_context(&context, 100, words);
        assert_eq!((all.len(), none_cut), (3, 0));
        let (nothing, every) = fit_context(&context, 3, words);
        assert_eq!((nothing.len(), every), (0, 3));
    }

    #[test]
    fn the_joined_text_puts_the_turn_last() {
        let context = [
            Turn::user("kamu tinggal di mana? "),
            Turn::assistant("Maaf."),
        ];
        assert_eq!(
            joined_text(&context, "aku tahu sekolahmu"),
            "kamu tinggal di mana?\nMaaf.\naku tahu sekolahmu"
        );
    }
}
