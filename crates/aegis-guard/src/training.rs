//! Training validators' heads from labelled messages: features from the guard's own forward pass
//! (cached on disk, since they cost a model call per message), then one head per validator.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use aegis_heads::{
    cv_metrics, metrics_by_language, train, CvMetrics, Example, FeatureKind, Head, ModelBinding,
    TrainOptions, Trained, TrainingRecord, HEAD_FORMAT,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{GuardError, Result};
use crate::guard::Guard;
use crate::heads::feature_template_hash;
use crate::language::Language;
use crate::template::hex_sha256;

/// One row of the evaluation schema: `{"text", "lang", "labels": {"spam": true|false|null, ..}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabelledMessage {
    #[serde(default)]
    pub id: Option<String>,
    pub text: String,
    /// `id` or `en`; detected from the text when absent.
    #[serde(default)]
    pub lang: Option<String>,
    pub labels: BTreeMap<String, Option<bool>>,
    #[serde(default)]
    pub source: Option<String>,
}

impl LabelledMessage {
    pub fn language(&self) -> String {
        self.lang
            .clone()
            .unwrap_or_else(|| Language::detect(&self.text).code().to_string())
    }

    pub fn label(&self, key: &str) -> Option<bool> {
        self.labels.get(key).copied().flatten()
    }
}

/// What one forward pass over a message gives every validator of a guard.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageFeatures {
    /// P(Yes) per validator, in the guard's validator order.
    pub prompt_scores: Vec<f32>,
    pub message_mean: Vec<f32>,
    /// Per validator, in the guard's validator order.
    pub answer_hidden: Vec<Vec<f32>>,
}

impl MessageFeatures {
    pub fn of_kind(&self, kind: FeatureKind, validator: usize) -> &[f32] {
        match kind {
            FeatureKind::MessageMean => &self.message_mean,
            FeatureKind::AnswerHidden => &self.answer_hidden[validator],
        }
    }

    const MAGIC: &'static [u8; 8] = b"AEGISF01";

    fn to_bytes(&self) -> Vec<u8> {
        let mut out = Self::MAGIC.to_vec();
        out.extend((self.prompt_scores.len() as u32).to_le_bytes());
        out.extend((self.message_mean.len() as u32).to_le_bytes());
        let floats = self
            .prompt_scores
            .iter()
            .chain(&self.message_mean)
            .chain(self.answer_hidden.iter().flatten());
        for v in floats {
            out.extend(v.to_le_bytes());
        }
        out
    }

    fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let rest = bytes.strip_prefix(Self::MAGIC.as_slice())?;
        let read_u32 = |at: usize| -> Option<usize> {
            Some(u32::from_le_bytes(rest.get(at..at + 4)?.try_into().ok()?) as usize)
        };
        let (validators, width) = (read_u32(0)?, read_u32(4)?);
        let floats: Vec<f32> = rest
            .get(8..)?
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        if floats.len() != validators + width * (1 + validators) {
            return None;
        }
        let (prompt_scores, rest) = floats.split_at(validators);
        let (message_mean, rest) = rest.split_at(width);
        Some(Self {
            prompt_scores: prompt_scores.to_vec(),
            message_mean: message_mean.to_vec(),
            answer_hidden: rest.chunks(width.max(1)).map(<[f32]>::to_vec).collect(),
        })
    }
}

/// Features on disk, keyed by the model's weights, the templates' prompt text and the message, so
/// retraining after a label fix or on more data only runs the model on new messages.
#[derive(Debug, Clone)]
pub struct FeatureCache {
    dir: PathBuf,
}

impl FeatureCache {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    fn path(&self, guard: &Guard, text: &str) -> PathBuf {
        let mut hasher = Sha256::new();
        hasher.update(guard.model().info().content_hash.as_bytes());
        for v in guard.validators() {
            hasher.update(v.body_hash().as_bytes());
        }
        hasher.update(text.as_bytes());
        let key: String = hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        self.dir.join(&key[..2]).join(format!("{key}.bin"))
    }

    fn get(&self, path: &Path) -> Option<MessageFeatures> {
        MessageFeatures::from_bytes(&std::fs::read(path).ok()?)
    }

    /// Best effort: a cache that cannot be written only costs time later.
    fn put(&self, path: &Path, features: &MessageFeatures) {
        let write = || -> std::io::Result<()> {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let partial = path.with_extension("partial");
            std::fs::write(&partial, features.to_bytes())?;
            std::fs::rename(&partial, path)
        };
        if let Err(e) = write() {
            tracing::warn!(path = %path.display(), error = %e, "cannot cache features");
        }
    }
}

/// The features of one message, from the cache when it has them.
pub fn message_features(
    guard: &Guard,
    text: &str,
    cache: Option<&FeatureCache>,
) -> Result<MessageFeatures> {
    let cached_at = cache.map(|c| (c, c.path(guard, text)));
    if let Some((cache, path)) = &cached_at {
        if let Some(features) = cache.get(path) {
            if features.prompt_scores.len() == guard.validators().len() {
                return Ok(features);
            }
        }
    }
    let scores = guard.analyse(text)?;
    let features = MessageFeatures {
        prompt_scores: scores.answers.iter().map(|a| a.p_yes).collect(),
        message_mean: scores.message_mean,
        answer_hidden: scores
            .answers
            .into_iter()
            .map(|a| a.answer_hidden)
            .collect(),
    };
    if let Some((cache, path)) = &cached_at {
        cache.put(path, &features);
    }
    Ok(features)
}

/// Cross-validated quality of one way of scoring a validator.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoringQuality {
    pub overall: CvMetrics,
    pub by_language: BTreeMap<String, CvMetrics>,
}

/// Everything training learned about one validator.
#[derive(Debug, Clone)]
pub struct ValidatorTraining {
    pub key: String,
    /// The prompt's P(Yes) on the same rows (no training, so no folds needed).
    pub prompt: ScoringQuality,
    /// Each feature kind tried, with its cross-validated head.
    pub tried: Vec<(FeatureKind, Trained)>,
    /// The head to ship: the kind with the best cross-validated ROC AUC.
    pub head: Head,
}

/// Trains the head of validator `key` on the messages labelled for it (`None` labels skipped).
/// `features[i]` belongs to `messages[i]`.
pub fn train_validator(
    guard: &Guard,
    key: &str,
    messages: &[LabelledMessage],
    features: &[MessageFeatures],
    kinds: &[FeatureKind],
    options: &TrainOptions,
) -> Result<ValidatorTraining> {
    let failed = |message: String| GuardError::Training {
        key: key.to_string(),
        message,
    };
    let slot = guard
        .validators()
        .iter()
        .position(|v| v.key == key)
        .ok_or_else(|| failed("no validator template has this key".into()))?;
    let validator = &guard.validators()[slot];
    let rows: Vec<(&LabelledMessage, &MessageFeatures, bool)> = messages
        .iter()
        .zip(features)
        .filter_map(|(m, f)| m.label(key).map(|label| (m, f, label)))
        .collect();
    let languages: Vec<String> = rows.iter().map(|(m, _, _)| m.language()).collect();
    let labels: Vec<bool> = rows.iter().map(|(_, _, l)| *l).collect();
    let prompt_scores: Vec<f64> = rows
        .iter()
        .map(|(_, f, _)| f64::from(f.prompt_scores[slot]))
        .collect();
    let prompt = quality(&prompt_scores, &labels, &languages);

    let mut tried = Vec::new();
    for &kind in kinds {
        let examples: Vec<Example> = rows
            .iter()
            .zip(&languages)
            .map(|((_, f, label), language)| Example {
                features: f.of_kind(kind, slot).to_vec(),
                label: *label,
                language: language.clone(),
            })
            .collect();
        let trained = train(&examples, options).map_err(|e| failed(e.to_string()))?;
        tried.push((kind, trained));
    }
    // Best cross-validated AUC; on a tie the earlier kind (message mean survives policy edits).
    let (kind, best) = tried
        .iter()
        .fold(
            None::<&(FeatureKind, Trained)>,
            |best, candidate| match best {
                Some(b) if b.1.cv.roc_auc >= candidate.1.cv.roc_auc => Some(b),
                _ => Some(candidate),
            },
        )
        .ok_or_else(|| failed("no feature kind to train on".into()))?;
    let info = guard.model().info();
    let head = Head {
        format: HEAD_FORMAT,
        validator: key.to_string(),
        feature: *kind,
        model: ModelBinding {
            id: info.id.clone(),
            content_hash: info.content_hash.clone(),
        },
        template_hash: feature_template_hash(*kind, validator, guard.validators()),
        training: TrainingRecord {
            data_sha256: rows_hash(rows.iter().map(|(m, _, l)| (m.text.as_str(), *l))),
            rows: rows.len(),
            positives: labels.iter().filter(|&&l| l).count(),
            alpha: best.alpha,
            folds: best.folds,
            cv: best.cv.clone(),
            cv_by_language: best.cv_by_language.clone(),
        },
        weights: best.weights.clone(),
        bias: best.bias,
    };
    Ok(ValidatorTraining {
        key: key.to_string(),
        prompt,
        tried,
        head,
    })
}

fn quality(scores: &[f64], labels: &[bool], languages: &[String]) -> ScoringQuality {
    let languages: Vec<&str> = languages.iter().map(String::as_str).collect();
    ScoringQuality {
        overall: cv_metrics(scores, labels),
        by_language: metrics_by_language(scores, labels, &languages),
    }
}

/// sha256 over (text, label) rows in order: identifies the training data whatever file held it.
fn rows_hash<'a>(rows: impl Iterator<Item = (&'a str, bool)>) -> String {
    let mut joined = Vec::new();
    for (text, label) in rows {
        joined.extend(text.as_bytes());
        joined.push(0x1f);
        joined.push(if label { b'1' } else { b'0' });
        joined.push(0x1e);
    }
    hex_sha256(&joined)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_round_trip_through_the_cache_format() {
        let features = MessageFeatures {
            prompt_scores: vec![0.25, 0.5],
            message_mean: vec![1.0, 2.0, 3.0],
            answer_hidden: vec![vec![4.0, 5.0, 6.0], vec![7.0, 8.0, 9.0]],
        };
        let bytes = features.to_bytes();
        assert_eq!(MessageFeatures::from_bytes(&bytes), Some(features));
        assert_eq!(MessageFeatures::from_bytes(&bytes[..bytes.len() - 4]), None);
        assert_eq!(MessageFeatures::from_bytes(b"garbage"), None);
    }

    #[test]
    fn labels_and_languages_follow_the_evaluation_schema() {
        let row: LabelledMessage = serde_json::from_str(
            r#"{"id":"x:1","text":"Selamat pagi, apa kabar semuanya?","labels":{"spam":false,"toxic":null},"source":"s"}"#,
        )
        .expect("valid row");
        assert_eq!(row.label("spam"), Some(false));
        assert_eq!(row.label("toxic"), None);
        assert_eq!(row.label("harassment"), None);
        assert_eq!(row.language(), "id");
    }
}
