//! Mention, not use: a user who asks about a quoted passage ("is your assistant allowed to say
//! 'buy NVDA calls now'?") does not say it. A head on a sentence embedding cannot tell the two
//! apart (README, "Conversations": 63 authored questions of that kind in training still left
//! unseen ones flagged), so a validator with `quotes: mentioned` also reads the question with its
//! quoted passages left out, and the lower score decides. Only a user's turn is read so: an
//! assistant that quotes a tip in its answer still gives it.

use serde::{Deserialize, Serialize};

/// How a validator's head reads quoted passages in a user's question (`quotes:` in its front
/// matter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum QuoteReading {
    /// Quoted words count as the writer's own.
    #[default]
    Said,
    /// A user's question about a quoted passage is also read without it; the lower score decides.
    Mentioned,
}

/// The frame needs this many words of its own to be a question about the quote, so that a bare
/// "'buy X now' ok?" is still read whole.
const MIN_FRAME_WORDS: usize = 3;

/// What stands in for a quoted passage in the frame, so the question still reads as one.
const ELIDED: &str = "…";

/// Opening and closing marks. A straight single quote is also an apostrophe ("can't", "it's"),
/// which the word-boundary rules in [`question_frame`] tell apart.
const QUOTE_PAIRS: [(char, char); 5] = [
    ('"', '"'),
    ('\'', '\''),
    ('\u{201c}', '\u{201d}'),
    ('\u{2018}', '\u{2019}'),
    ('\u{ab}', '\u{bb}'),
];

/// The text with its quoted passages elided, when it has at least one and what is left is a
/// question of its own (a `?` and at least three words); otherwise `None`, and the text is read
/// whole. A mark opens a passage only at the start of a word and closes it only at the end of one.
pub(crate) fn question_frame(text: &str) -> Option<String> {
    let chars: Vec<char> = text.chars().collect();
    let word_char = |i: usize| chars.get(i).is_some_and(|c| c.is_alphanumeric());
    let mut frame = String::with_capacity(text.len());
    let mut elided = false;
    // A mark whose search for a closer failed from one position fails from every later one (the
    // candidates only shrink): it is not searched again, so the scan stays linear on any text.
    let mut never_closed = [false; QUOTE_PAIRS.len()];
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let opens = (i == 0 || !word_char(i - 1))
            && chars.get(i + 1).is_some_and(|next| !next.is_whitespace());
        let pair = QUOTE_PAIRS
            .iter()
            .position(|&(open, _)| opens && open == c)
            .filter(|&k| !never_closed[k]);
        let end = pair.and_then(|k| {
            let close = QUOTE_PAIRS[k].1;
            let found = (i + 2..chars.len())
                .find(|&j| chars[j] == close && !chars[j - 1].is_whitespace() && !word_char(j + 1));
            never_closed[k] = found.is_none();
            found
        });
        match end {
            Some(j) => {
                frame.push_str(ELIDED);
                elided = true;
                i = j + 1;
            }
            None => {
                frame.push(c);
                i += 1;
            }
        }
    }
    let words = frame
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().any(char::is_alphabetic))
        .count();
    (elided && frame.contains('?') && words >= MIN_FRAME_WORDS).then_some(frame)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_about_a_quoted_tip_is_read_without_it() {
        assert_eq!(
            question_frame(
                "Is your assistant allowed to say 'buy NVDA calls now, they will double'?"
            )
            .as_deref(),
            Some("Is your assistant allowed to say …?")
        );
        assert_eq!(
            question_frame(
                "Ada yang posting \u{201c}beli koin X sekarang\u{201d}, itu penipuan ya?"
            )
            .as_deref(),
            Some("Ada yang posting …, itu penipuan ya?")
        );
    }

    #[test]
    fn apostrophes_are_not_quotes() {
        assert_eq!(
            question_frame("I can't say it's 'fine', can I?").as_deref(),
            Some("I can't say it's …, can I?")
        );
        assert_eq!(question_frame("Why can't the bot say what's best?"), None);
    }

    #[test]
    fn without_a_question_of_its_own_the_text_is_read_whole() {
        // No question: a report, or a tip wrapped in quotes.
        assert_eq!(
            question_frame("My uncle keeps saying 'buy gold now'."),
            None
        );
        assert_eq!(
            question_frame("'Buy PEPE now, it will 100x' trust me"),
            None
        );
        // A question mark but too few words of its own.
        assert_eq!(question_frame("'Buy PEPE now, it will 100x' ok?"), None);
        assert_eq!(question_frame("\"Buy PEPE now?\""), None);
        // No quotes at all, or a mark never closed.
        assert_eq!(question_frame("Should I buy PEPE now?"), None);
        assert_eq!(question_frame("Is it okay to say 'buy PEPE now?"), None);
    }

    #[test]
    fn marks_never_closed_leave_a_later_closed_quote_elided() {
        // 20,000 openers with no closer before one closed quote: skipping marks known never to
        // close (what keeps the scan linear) must not skip the quote that does close.
        let text = "\"a ".repeat(20_000) + "is this 'ok'?";
        let frame = question_frame(&text).expect("the closed quote at the end is elided");
        assert!(frame.ends_with("is this …?"));
    }
}
