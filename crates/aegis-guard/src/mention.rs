//! Mention, not use: a user who asks about a quoted passage ("is your assistant allowed to say
//! 'buy NVDA calls now'?") does not say it, and neither does one who reports it ("the user wrote
//! 'I'll find where you live'. Please escalate this."). A head on a sentence embedding cannot tell
//! the two apart (README, "Conversations": 63 authored questions of that kind in training still
//! left unseen ones flagged), so a validator with `quotes: mentioned` or `quotes: reported` also
//! reads the turn with its quoted passages left out, and the lower score decides. Only a user's
//! turn is read so: an assistant that quotes a tip in its answer still gives it.

use serde::{Deserialize, Serialize};

/// How a validator's head reads quoted passages in a user's turn (`quotes:` in its front
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
    /// As `Mentioned`, and a report that is not a question too, when its own words are enough to
    /// be one ([`REPORT_FRAME_WORDS`]). For toxic and harassment, where reports of abuse quote
    /// it; not for financial advice, where "my broker says 'buy gold now', do it" passes a tip on.
    Reported,
}

impl QuoteReading {
    /// Whether a validator reading quotes so scores a user's turn by its frame, a question
    /// (`frame_is_question`) or a report.
    pub(crate) fn reads(self, frame_is_question: bool) -> bool {
        match self {
            Self::Said => false,
            Self::Mentioned => frame_is_question,
            Self::Reported => true,
        }
    }
}

/// A user's turn with its quoted passages elided, and whether what is left asks a question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QuotedFrame {
    pub text: String,
    pub is_question: bool,
}

/// The frame needs this many words of its own to be a question about the quote, so that a bare
/// "'buy X now' ok?" is still read whole.
const MIN_FRAME_WORDS: usize = 3;

/// A frame that asks nothing needs this many words of its own to be a report ("the user wrote
/// …, please escalate this"), so that an insult with a word or two around it ("…, Tom") is
/// still read whole.
pub(crate) const REPORT_FRAME_WORDS: usize = 5;

/// What stands in for a quoted passage in the frame, so the question still reads as one.
const ELIDED: &str = "…";

/// Opening and closing marks. A straight single quote is also an apostrophe ("can't", "it's"),
/// which the word-boundary rules in [`quoted_frame`] tell apart.
const QUOTE_PAIRS: [(char, char); 5] = [
    ('"', '"'),
    ('\'', '\''),
    ('\u{201c}', '\u{201d}'),
    ('\u{2018}', '\u{2019}'),
    ('\u{ab}', '\u{bb}'),
];

/// The text with its quoted passages elided, when it has at least one and what is left is a
/// question of its own (a `?` and at least three words) or a report (at least
/// [`REPORT_FRAME_WORDS`] words); otherwise `None`, and the text is read whole. A mark opens a
/// passage only at the start of a word and closes it only at the end of one.
pub(crate) fn quoted_frame(text: &str) -> Option<QuotedFrame> {
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
    let is_question = frame.contains('?');
    let enough = if is_question {
        MIN_FRAME_WORDS
    } else {
        REPORT_FRAME_WORDS
    };
    (elided && words >= enough).then_some(QuotedFrame {
        text: frame,
        is_question,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The frame's text where it asks a question, what `quotes: mentioned` reads.
    fn question_frame(text: &str) -> Option<String> {
        quoted_frame(text)
            .filter(|f| QuoteReading::Mentioned.reads(f.is_question))
            .map(|f| f.text)
    }

    /// The frame's text where it is a report and asks nothing, what only `quotes: reported` reads.
    fn report_frame(text: &str) -> Option<String> {
        quoted_frame(text)
            .filter(|f| !f.is_question && QuoteReading::Reported.reads(f.is_question))
            .map(|f| f.text)
    }

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
        assert_eq!(quoted_frame("Why can't the bot say what's best?"), None);
    }

    #[test]
    fn without_a_question_or_a_report_of_its_own_the_text_is_read_whole() {
        // Too few words of its own for a report: a tip or an insult wrapped in quotes.
        assert_eq!(quoted_frame("My uncle keeps saying 'buy gold now'."), None);
        assert_eq!(quoted_frame("'Buy PEPE now, it will 100x' trust me"), None);
        assert_eq!(
            quoted_frame("\"You worthless pig\", Tom, that's you."),
            None
        );
        // A question mark but too few words of its own.
        assert_eq!(quoted_frame("'Buy PEPE now, it will 100x' ok?"), None);
        assert_eq!(quoted_frame("\"Buy PEPE now?\""), None);
        // No quotes at all, or a mark never closed.
        assert_eq!(quoted_frame("Should I buy PEPE now?"), None);
        assert_eq!(quoted_frame("Is it okay to say 'buy PEPE now?"), None);
    }

    #[test]
    fn a_report_quoting_abuse_is_read_without_it_only_where_reports_are() {
        let report = "Screenshot attached: the user wrote \"I'll find where you live\". Please escalate this.";
        assert_eq!(
            report_frame(report).as_deref(),
            Some("Screenshot attached: the user wrote …. Please escalate this.")
        );
        assert_eq!(question_frame(report), None);
        assert_eq!(
            report_frame(
                "Kemarin ada bapak-bapak bilang \"perempuan bodoh\" ke aku, aku mau lapor."
            )
            .as_deref(),
            Some("Kemarin ada bapak-bapak bilang … ke aku, aku mau lapor.")
        );
        // A question is read by both.
        let question = quoted_frame("Is \"idiot\" an insult in your rules?").expect("a question");
        assert!(
            QuoteReading::Mentioned.reads(question.is_question)
                && QuoteReading::Reported.reads(question.is_question)
        );
        assert!(!QuoteReading::Said.reads(question.is_question));
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
