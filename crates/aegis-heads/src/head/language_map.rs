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

/// The probability the `rule` gives a message detected in `language`: from `maps`, or from the
/// head's own map (`own`) where no map applies. One place for the head and its training.
pub(crate) fn probability_by_rule(
    maps: &[LanguageMap],
    rule: LanguageRule,
    language: &str,
    input: &[f32],
    own: impl FnOnce() -> Result<f64>,
) -> Result<f64> {
    match rule {
        LanguageRule::Highest if !maps.is_empty() => {
            let mut highest = 0.0f64;
            for map in maps {
                highest = highest.max(map.probability(input)?);
            }
            Ok(highest)
        }
        _ => match maps.iter().find(|m| m.language == language) {
            Some(map) => map.probability(input),
            None => own(),
        },
    }
}

impl LanguageRule {
    pub fn is_detected(&self) -> bool {
        *self == Self::Detected
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{head, no_layers};
    use super::*;
    use crate::head::{sigmoid, Head};

    /// A message the guard detects in a language with a map of its own is scored by that map;
    /// others by the head's own. A map of another width, or a language mapped twice, is refused
    /// when the head is read.
    #[test]
    fn a_language_map_scores_that_languages_messages_and_is_checked_when_read() {
        let mut with_map = head();
        with_map.languages.push(LanguageMap {
            language: "id".into(),
            weights: vec![-1.0, 1.0],
            bias: 0.0,
            hidden: Some(HiddenLayer {
                weights: vec![1.0, 1.0],
                bias: vec![0.0],
                out: vec![1.0],
            }),
        });
        let input = [1.0f32, 2.0];
        // Own map: 1 - 4 + 0.5; Indonesian map: -1 + 2 + relu(3) * 1.
        let en = with_map.probability(&input, "en", &no_layers).expect("en");
        let id = with_map.probability(&input, "id", &no_layers).expect("id");
        assert!((f64::from(en) - sigmoid(-2.5)).abs() < 1e-6, "{en}");
        assert!((f64::from(id) - sigmoid(4.0)).abs() < 1e-6, "{id}");
        assert_eq!(
            with_map.probability(&input, "fr", &no_layers).expect("fr"),
            en,
            "a language without a map of its own reads the head's"
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("harassment.json");
        with_map.save(&path).expect("save");
        assert_eq!(
            Head::load(&path).expect("load").languages,
            with_map.languages
        );
        let mut twice = with_map.clone();
        twice.languages.push(twice.languages[0].clone());
        twice.save(&path).expect("save");
        let err = Head::load(&path).unwrap_err().to_string();
        assert!(err.contains("two maps"), "{err}");
        with_map.languages[0].weights.push(0.0);
        with_map.save(&path).expect("save");
        let err = Head::load(&path).unwrap_err().to_string();
        assert!(err.contains("language \"id\""), "{err}");
        // A head without maps writes nothing of them: files from before stay byte for byte.
        head().save(&path).expect("save");
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(!text.contains("languages"), "{text}");
        assert!(!text.contains("language_rule"), "{text}");
    }

    /// Under the highest rule every message reads every language's map and takes the highest,
    /// whatever language it is detected in: an Indonesian insult with English words after it
    /// is read by the Indonesian map too.
    #[test]
    fn the_highest_rule_reads_every_languages_map_whatever_the_detected_language() {
        let mut highest = head();
        highest.language_rule = LanguageRule::Highest;
        for (language, weights) in [("en", vec![-1.0, -1.0]), ("id", vec![-1.0, 1.0])] {
            highest.languages.push(LanguageMap {
                language: language.into(),
                weights,
                bias: 0.0,
                hidden: None,
            });
        }
        let input = [1.0f32, 2.0];
        // English map: -1 - 2; Indonesian map: -1 + 2; the head's own map reads no message.
        for detected in ["en", "id", "fr"] {
            let p = highest
                .probability(&input, detected, &no_layers)
                .expect("p");
            assert!(
                (f64::from(p) - sigmoid(1.0)).abs() < 1e-6,
                "{detected}: {p}"
            );
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("toxic.json");
        highest.save(&path).expect("save");
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(text.contains("\"language_rule\": \"highest\""), "{text}");
        assert_eq!(
            Head::load(&path).expect("load").language_rule,
            LanguageRule::Highest
        );
    }
}
