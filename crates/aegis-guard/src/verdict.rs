//! What the guard says about one message: a result per validator, and the verdict around them.

use serde::{Deserialize, Serialize};

use crate::context::TurnReport;
use crate::language::Language;
use crate::readings::{find_reading, ReadingScore};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum Status {
    Passed,
    Failed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Passed => "passed",
            Self::Failed => "failed",
        }
    }
}

/// What decided a validator's score.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum ScoreSource {
    /// The prompt's P(Yes).
    Prompt,
    /// A learned head on the shared encoding of the message.
    Head,
}

impl ScoreSource {
    /// What decides a validator that has a head (`with_head`) or only its prompt.
    pub fn deciding(with_head: bool) -> Self {
        if with_head {
            Self::Head
        } else {
            Self::Prompt
        }
    }

    /// The word history, reports and the API write.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Prompt => "prompt",
            Self::Head => "head",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ValidatorResult {
    pub key: String,
    pub name: String,
    /// P(violation), in (0, 1): the learned score when the validator has a usable head, else the
    /// prompt's.
    pub score: f32,
    /// P(Yes) from the validator's own prompt: computed where the prompt decides, or where it was
    /// asked for (`Guard::with_prompt_scores`); a head-decided validator skips it otherwise.
    pub prompt_score: Option<f32>,
    /// The head's calibrated probability, when a head for this model exists.
    pub learned_score: Option<f32>,
    /// Each reading the head made of the turn (the turn as written first, then those its
    /// validator reads: in context, with quotes elided, ...), which decided, and which turned the
    /// decision; empty where no head on the sentence encoder scored it.
    pub readings: Vec<ReadingScore>,
    pub decided_by: ScoreSource,
    /// sha256 of the head file that scored it (as `aegis heads versions` and the Teach view list
    /// them), when a head did.
    pub head_hash: Option<String>,
    pub threshold: f32,
    /// The score is below the threshold.
    pub passed: bool,
    pub latency_ms: f64,
}

impl ValidatorResult {
    /// The head's score on the reading named `reading`, where it made it.
    pub fn read_as(&self, reading: &str) -> Option<f32> {
        find_reading(&self.readings, reading).map(|r| r.score)
    }

    /// Whether the reading named `reading` turned the decision (see [`ReadingScore::turned`]).
    pub fn turned_by(&self, reading: &str) -> bool {
        find_reading(&self.readings, reading).is_some_and(|r| r.turned)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct TemplateVersion {
    pub key: String,
    pub content_hash: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ModelRef {
    pub id: String,
    pub content_hash: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Verdict {
    pub status: Status,
    /// "aman" when every validator passed, else the failed keys joined by ", " (original API).
    pub case: String,
    /// The validators that apply to the checked turn's role, in order.
    pub results: Vec<ValidatorResult>,
    /// The keys of validators that do not apply to the turn's role (`applies_to`).
    pub skipped: Vec<String>,
    /// The turn checked and the context read with it.
    pub turn: TurnReport,
    /// Empty when passed.
    pub rejection_message: String,
    pub language: Language,
    pub model: ModelRef,
    /// The sentence encoder the heads read, where one is loaded: a local one by its weights'
    /// hash, one on a server by the served model and the server's URL.
    pub encoder: Option<ModelRef>,
    pub templates: Vec<TemplateVersion>,
    pub latency_ms: f64,
}
