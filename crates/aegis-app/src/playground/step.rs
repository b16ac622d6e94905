//! What the window hears of a Playground exchange as it happens: the console's events carry
//! these, so they depend on nothing of the relay.

use serde::Serialize;

/// One check, as the Playground charts it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct PlaygroundCheck {
    pub passed: bool,
    /// Characters of the answer before the part this check was the first to read (0 for the
    /// user's turn).
    pub offset: usize,
    /// Characters it read.
    pub checked_chars: usize,
    pub scores: Vec<PlaygroundScore>,
    /// The first validator that failed.
    pub failed: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct PlaygroundScore {
    pub key: String,
    pub score: f32,
    pub threshold: f32,
}

/// What just happened to an exchange, in order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PlaygroundStep {
    /// The user's turn was checked; when it failed, nothing went upstream and `rejection` is the
    /// answer.
    Question {
        check: PlaygroundCheck,
        rejection: String,
    },
    /// Text the answer now shows, and the check that released it, if one did.
    Text {
        text: String,
        check: Option<PlaygroundCheck>,
    },
    /// A check failed: the answer stops here and the rejection stands after it.
    Cut {
        check: PlaygroundCheck,
        rejection: String,
    },
    /// The answer ended: `stop`, `length` or `content_filter`.
    Finished {
        reason: String,
    },
    Failed {
        message: String,
    },
}
