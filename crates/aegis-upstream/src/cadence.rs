//! Where a streamed answer is checked, and how much of it the client may have. A check reads the
//! whole answer so far, in its conversation; it falls at a sentence's end, or after
//! `check_every` pieces without one (a list, code, a run-on), and once more at the end.

use serde::Deserialize;

/// Pieces (an upstream's chunks: about a token each) between checks when no sentence ends.
pub const DEFAULT_CHECK_EVERY: usize = 48;

/// Pieces before the first check even without a sentence's end: with `Release::Checked` the
/// client sees the answer begin after a few words and one check, not after a whole sentence.
pub const FIRST_CHECK_AFTER: usize = 8;

/// How a streamed answer reaches the client.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Release {
    /// Nothing unchecked reaches the client: each part is sent once a check has passed it. Costs
    /// the time of one check per sentence.
    #[default]
    Checked,
    /// Each piece is sent as it arrives, and a failing check cuts the rest. Lower latency; what
    /// was sent stays sent.
    Immediate,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamPolicy {
    pub release: Release,
    /// At least 1.
    pub check_every: usize,
}

impl Default for StreamPolicy {
    fn default() -> Self {
        Self {
            release: Release::default(),
            check_every: DEFAULT_CHECK_EVERY,
        }
    }
}

/// A check to run: the answer's first `upto` bytes, of which the part from `from` on has not
/// been checked before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckPoint {
    pub from: usize,
    pub upto: usize,
}

/// An answer as it arrives.
#[derive(Debug)]
pub struct GrowingAnswer {
    policy: StreamPolicy,
    text: String,
    /// Bytes the client has.
    released: usize,
    /// Bytes a passed check has covered.
    checked: usize,
    /// Bytes a check now running covers; further checks wait for it.
    checking: Option<CheckPoint>,
    pieces_since_check: usize,
}

impl GrowingAnswer {
    pub fn new(policy: StreamPolicy) -> Self {
        Self {
            policy: StreamPolicy {
                check_every: policy.check_every.max(1),
                ..policy
            },
            text: String::new(),
            released: 0,
            checked: 0,
            checking: None,
            pieces_since_check: 0,
        }
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// Adds a piece of the answer; returns what the client may have now.
    pub fn push(&mut self, piece: &str) -> &str {
        if piece.is_empty() {
            return "";
        }
        self.text.push_str(piece);
        self.pieces_since_check += 1;
        match self.policy.release {
            Release::Immediate => self.release_to(self.text.len()),
            Release::Checked => "",
        }
    }

    /// The check to start now, if one is due and none is running: the text since the last check
    /// holds a sentence's end, or `check_every` pieces came since it, or `finished` (the answer
    /// is complete and part of it is unchecked).
    pub fn due(&mut self, finished: bool) -> Option<CheckPoint> {
        let from = self.checking.map_or(self.checked, |c| c.upto);
        if self.checking.is_some() || from == self.text.len() {
            return None;
        }
        let every = if from == 0 {
            FIRST_CHECK_AFTER.min(self.policy.check_every)
        } else {
            self.policy.check_every
        };
        let due =
            finished || self.pieces_since_check >= every || ends_a_sentence(&self.text[from..]);
        if !due {
            return None;
        }
        let point = CheckPoint {
            from,
            upto: self.text.len(),
        };
        self.checking = Some(point);
        self.pieces_since_check = 0;
        Some(point)
    }

    /// The running check passed; returns what the client may have now.
    pub fn passed(&mut self, point: CheckPoint) -> &str {
        self.checking = None;
        self.checked = self.checked.max(point.upto);
        match self.policy.release {
            Release::Checked => self.release_to(point.upto),
            Release::Immediate => "",
        }
    }

    /// Whether all of the answer has passed a check.
    pub fn all_checked(&self) -> bool {
        self.checked == self.text.len() && self.checking.is_none()
    }

    /// Bytes the client has been sent.
    pub fn released(&self) -> usize {
        self.released
    }

    fn release_to(&mut self, upto: usize) -> &str {
        let from = self.released;
        self.released = self.released.max(upto);
        &self.text[from..self.released]
    }
}

/// The text holds the end of a sentence: a full stop, question or exclamation mark followed by
/// white space (so "3.5" and "e.g" do not count, and the sentence is whole), an ideographic one,
/// or a line break.
fn ends_a_sentence(text: &str) -> bool {
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' | '。' | '！' | '？' => return true,
            '.' | '!' | '?' | '…' if chars.peek().is_some_and(|n| n.is_whitespace()) => {
                return true
            }
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(release: Release, check_every: usize) -> GrowingAnswer {
        GrowingAnswer::new(StreamPolicy {
            release,
            check_every,
        })
    }

    #[test]
    fn held_back_text_is_released_only_once_checked() {
        let mut growing = answer(Release::Checked, 100);
        assert_eq!(growing.push("Hello"), "");
        assert_eq!(growing.due(false), None);
        assert_eq!(growing.push(" there."), "");
        assert_eq!(
            growing.due(false),
            None,
            "a full stop at the end may be 3.5"
        );
        assert_eq!(growing.push(" How"), "");
        let point = growing.due(false).expect("a sentence ended");
        assert_eq!(point, CheckPoint { from: 0, upto: 16 });
        assert_eq!(growing.push(" are you?"), "");
        assert_eq!(growing.due(true), None, "one check at a time");
        assert_eq!(growing.passed(point), "Hello there. How");
        let last = growing.due(true).expect("the rest, at the end");
        assert_eq!(last, CheckPoint { from: 16, upto: 25 });
        assert!(!growing.all_checked());
        assert_eq!(growing.passed(last), " are you?");
        assert!(growing.all_checked());
        assert_eq!(growing.due(true), None);
    }

    #[test]
    fn immediate_text_is_released_as_it_comes() {
        let mut growing = answer(Release::Immediate, 100);
        assert_eq!(growing.push("Hi."), "Hi.");
        assert_eq!(growing.push(" Bye"), " Bye");
        let point = growing.due(false).expect("a sentence ended");
        assert_eq!(growing.passed(point), "");
        assert_eq!(growing.released(), 7);
    }

    #[test]
    fn a_run_without_a_sentence_end_is_checked_every_n_pieces() {
        let mut growing = answer(Release::Checked, 3);
        growing.push("a");
        growing.push(" b");
        assert_eq!(growing.due(false), None);
        growing.push(" c");
        assert_eq!(growing.due(false), Some(CheckPoint { from: 0, upto: 5 }));
    }

    #[test]
    fn the_first_check_comes_after_a_few_pieces() {
        let mut growing = answer(Release::Checked, 100);
        for _ in 0..FIRST_CHECK_AFTER - 1 {
            growing.push(" word");
            assert_eq!(growing.due(false), None);
        }
        growing.push(" word");
        let first = growing.due(false).expect("the opening is checked early");
        assert_eq!(growing.passed(first).len(), 5 * FIRST_CHECK_AFTER);
        for _ in 0..FIRST_CHECK_AFTER {
            growing.push(" word");
        }
        assert_eq!(
            growing.due(false),
            None,
            "later checks wait for a sentence or check_every"
        );
    }

    #[test]
    fn sentence_ends() {
        for yes in [
            "Done. Next",
            "Really?\n",
            "line\nnext",
            "好。",
            "Wow! ok",
            "so… then",
        ] {
            assert!(ends_a_sentence(yes), "{yes:?}");
        }
        for no in ["3.5 percent", "e.g", "Done.", "Rp 50.000,00"] {
            assert!(!ends_a_sentence(no), "{no:?}");
        }
    }

    #[test]
    fn nothing_is_checked_twice_or_left_unchecked() {
        let mut growing = answer(Release::Checked, 2);
        let mut covered = 0;
        for piece in ["One. ", "two ", "three ", "four. ", "five"] {
            growing.push(piece);
            if let Some(point) = growing.due(false) {
                assert_eq!(point.from, covered);
                covered = point.upto;
                growing.passed(point);
            }
        }
        let last = growing.due(true).expect("the tail");
        assert_eq!(last.from, covered);
        growing.passed(last);
        assert!(growing.all_checked());
        assert_eq!(growing.released(), growing.text().len());
    }
}
