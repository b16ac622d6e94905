//! Which language a message is in, so the rejection answers in the user's language.

use whatlang::{Detector, Lang};

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum Language {
    Indonesian,
    English,
}

impl Language {
    /// Indonesian when the text reads as Indonesian (or Malay, its close sibling), else English.
    pub fn detect(text: &str) -> Self {
        let detector = Detector::with_allowlist(vec![Lang::Ind, Lang::Eng]);
        match detector.detect_lang(text) {
            Some(Lang::Ind) => Self::Indonesian,
            _ => Self::English,
        }
    }

    /// The language a code names (`id`, `en`), if it is one the guard supports.
    pub fn from_code(code: &str) -> Option<Self> {
        match code.trim().to_ascii_lowercase().as_str() {
            "id" => Some(Self::Indonesian),
            "en" => Some(Self::English),
            _ => None,
        }
    }

    pub fn code(self) -> &'static str {
        match self {
            Self::Indonesian => "id",
            Self::English => "en",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_indonesian_from_english() {
        assert_eq!(
            Language::detect("Bagaimana cara top up saldo saya?"),
            Language::Indonesian
        );
        assert_eq!(
            Language::detect("How do I top up my balance?"),
            Language::English
        );
    }
}
