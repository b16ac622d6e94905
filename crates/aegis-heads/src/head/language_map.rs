//! A head's map for one language's messages.

use serde::{Deserialize, Serialize};

use super::logit::probability_with;
use crate::error::Result;
use crate::hidden::HiddenLayer;

/// One language's map (issue 64): a linear map, and a hidden layer where the head has one: the
/// head's own map, which every row teaches, plus a correction only that language's rows teach,
/// folded into one. Why: a map shared by both languages trades one's ranking for the other's
/// (the Indonesian writers' rows that taught harassment its Indonesian contempt lowered its
/// ranking of English public sources); a map trained on one language's rows alone gives that
/// back but learns each language from half the rows (heads README, "A map per language").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LanguageMap {
    /// The language code (`id`, `en`) the guard detects in the messages this map scores.
    pub language: String,
    pub weights: Vec<f32>,
    pub bias: f32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden: Option<HiddenLayer>,
}

impl LanguageMap {
    pub fn probability(&self, input: &[f32]) -> Result<f64> {
        probability_with(&self.weights, self.bias, self.hidden.as_ref(), input)
    }

    /// Why the map cannot stand beside a head whose own map reads inputs of `width`.
    pub(super) fn check(&self, width: usize) -> std::result::Result<(), String> {
        if self.weights.len() != width
            || !self.bias.is_finite()
            || self.weights.iter().any(|w| !w.is_finite())
        {
            return Err(format!(
                "the map for language {:?} has weights of another width than the head's or \
                 not finite",
                self.language
            ));
        }
        match &self.hidden {
            Some(hidden) => hidden
                .check(width)
                .map_err(|why| format!("the map for language {:?}: {why}", self.language)),
            None => Ok(()),
        }
    }
}

/// Which of a head's language maps scores a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LanguageRule {
    /// The map of the language the guard detects in the message; the head's own map for a
    /// language without one.
    #[default]
    Detected,
    /// The highest of the languages' maps, whatever language the guard detects: a message is a
    /// violation if any language's reading of it says so. Why: a detected language is one guess
    /// for the whole message, and chat mixes languages; "dasar goblok kamu anjing" with a few
    /// English words after it is detected English, and the English map, which learned that
    /// Indonesian insults are not English ones, let it through (session 63).
    Highest,
}

impl LanguageRule {
    pub fn is_detected(&self) -> bool {
        *self == Self::Detected
    }
}
