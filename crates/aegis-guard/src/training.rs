//! Training validators' heads from labelled messages: the shared encoding's mean after every layer
//! (cached on disk, since it costs a model call per message), then per validator the layers that
//! cross-validate best and a head on them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use aegis_engine::EncoderReading;
use aegis_heads::{
    candidate_label, cv_metrics, metrics_by_language, train, CvMetrics, Encoder, Example, Features,
    Head, ModelBinding, TrainOptions, Trained, TrainingRecord, HEAD_FORMAT,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{GuardError, Result};
use crate::guard::Guard;
use crate::heads::{
    encoder_context_hash, encoding_context_hash, encoding_prompt, ENCODING_PREAMBLE,
};
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
    /// For rows the project wrote: what kind of traffic they stand for (`short-reply`,
    /// `transactional`, ...), their group in validation by source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
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

    /// The group validation by source keeps together: the row's source, except for rows the
    /// project wrote (`aegis_*` sources), which form one group per language and kind (the labels
    /// that are true, or benign), since a kind written by one author is a style of its own.
    pub fn source_group(&self) -> String {
        let source = self.source.as_deref().unwrap_or("(no source)");
        if !source.starts_with("aegis_") {
            return source.to_string();
        }
        let positives: Vec<&str> = self
            .labels
            .iter()
            .filter(|(_, label)| **label == Some(true))
            .map(|(key, _)| key.as_str())
            .collect();
        let kind = match (&self.kind, positives.is_empty()) {
            (Some(kind), _) => kind.clone(),
            (None, true) => "benign".to_string(),
            (None, false) => positives.join("+"),
        };
        format!("{source}:{}:{kind}", self.language())
    }

    /// Benign traffic: labelled for something, and every label false (none unknown).
    pub fn is_benign(&self) -> bool {
        !self.labels.is_empty() && self.labels.values().all(|l| *l == Some(false))
    }
}

/// What training reads of one message: the mean after every layer up to the deepest candidate
/// (of the shared encoding on the model, or of the sentence encoder when the guard's heads read
/// one, with its embedding beside them), and (when asked for) each validator's prompt score, to
/// report the prompt's own quality beside the heads'.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageFeatures {
    /// `layers[i]` is the mean after layer `i + 1`.
    pub layers: Vec<Vec<f32>>,
    /// The sentence encoder's embedding, with an encoder.
    pub embedding: Option<Vec<f32>>,
    /// P(Yes) per validator, in the guard's validator order.
    pub prompt_scores: Option<Vec<f32>>,
}

impl MessageFeatures {
    /// The head input for `layers`: their means concatenated in order; none is the embedding.
    pub fn input(&self, layers: &[usize]) -> Vec<f32> {
        if layers.is_empty() {
            return self.embedding.clone().unwrap_or_default();
        }
        layers
            .iter()
            .flat_map(|&l| self.layers[l - 1].iter().copied())
            .collect()
    }
}

const LAYERS_MAGIC: &[u8; 8] = b"AEGISL01";
const PROMPTS_MAGIC: &[u8; 8] = b"AEGISP01";

fn floats_to_bytes(magic: &[u8; 8], rows: &[Vec<f32>]) -> Vec<u8> {
    let mut out = magic.to_vec();
    out.extend((rows.len() as u32).to_le_bytes());
    out.extend((rows.first().map_or(0, Vec::len) as u32).to_le_bytes());
    for v in rows.iter().flatten() {
        out.extend(v.to_le_bytes());
    }
    out
}

fn floats_from_bytes(magic: &[u8; 8], bytes: &[u8]) -> Option<Vec<Vec<f32>>> {
    let rest = bytes.strip_prefix(magic.as_slice())?;
    let read_u32 = |at: usize| -> Option<usize> {
        Some(u32::from_le_bytes(rest.get(at..at + 4)?.try_into().ok()?) as usize)
    };
    let (rows, width) = (read_u32(0)?, read_u32(4)?);
    let floats: Vec<f32> = rest
        .get(8..)?
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if floats.len() != rows * width || width == 0 {
        return None;
    }
    Some(floats.chunks(width).map(<[f32]>::to_vec).collect())
}

/// Features on disk, keyed by the model's weights, the encoding preamble (and for prompt scores
/// the templates' text) and the message, so retraining after a label fix or on more data only
/// runs the model on new messages.
#[derive(Debug, Clone)]
pub struct FeatureCache {
    dir: PathBuf,
}

impl FeatureCache {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    fn path(&self, guard: &Guard, text: &str, prompts: bool) -> PathBuf {
        let mut hasher = Sha256::new();
        match (guard.encoder(), prompts) {
            (Some(encoder), false) => {
                hasher.update(b"encoder");
                hasher.update(encoder.info().content_hash.as_bytes());
                hasher.update(encoder.info().prompt.as_bytes());
                hasher.update(encoder.info().weight_format.as_bytes());
            }
            _ => hasher.update(guard.model().info().content_hash.as_bytes()),
        }
        if prompts {
            for v in guard.validators() {
                hasher.update(v.body_hash().as_bytes());
            }
        } else {
            hasher.update(ENCODING_PREAMBLE.as_bytes());
        }
        hasher.update(text.as_bytes());
        let key: String = hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let kind = if prompts { "p" } else { "l" };
        self.dir.join(&key[..2]).join(format!("{key}.{kind}.bin"))
    }

    fn get(&self, path: &Path, magic: &[u8; 8]) -> Option<Vec<Vec<f32>>> {
        floats_from_bytes(magic, &std::fs::read(path).ok()?)
    }

    /// Best effort: a cache that cannot be written only costs time later.
    fn put(&self, path: &Path, magic: &[u8; 8], rows: &[Vec<f32>]) {
        let write = || -> std::io::Result<()> {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let partial = path.with_extension("partial");
            std::fs::write(&partial, floats_to_bytes(magic, rows))?;
            std::fs::rename(&partial, path)
        };
        if let Err(e) = write() {
            tracing::warn!(path = %path.display(), error = %e, "cannot cache features");
        }
    }
}

/// The features of several messages (from the cache where it has them), the model run on the
/// rest in one batch: the means after layers 1 to `depth` (the pass stops there, so a shallower
/// search costs less), and with an encoder its embedding too (a full pass). `prompts`: also each
/// validator's prompt score.
pub fn message_features(
    guard: &Guard,
    texts: &[&str],
    cache: Option<&FeatureCache>,
    depth: usize,
    prompts: bool,
) -> Vec<Result<MessageFeatures>> {
    // Cached rows: the means after layers 1..=depth, the encoder's embedding first when there is
    // one. A deeper earlier read holds these layers too.
    let (layers, embedded): (Vec<usize>, bool) = match guard.encoder() {
        Some(encoder) => ((1..=depth.min(encoder.info().layers)).collect(), true),
        None => (
            (1..=depth.min(guard.model().info().layers)).collect(),
            false,
        ),
    };
    let wanted = layers.len() + usize::from(embedded);
    let mut encoded: Vec<Option<Result<Vec<Vec<f32>>>>> = texts
        .iter()
        .map(|t| {
            let cache = cache?;
            let mut rows = cache.get(&cache.path(guard, t, false), LAYERS_MAGIC)?;
            rows.truncate(wanted);
            (rows.len() == wanted).then_some(Ok(rows))
        })
        .collect();
    let missing: Vec<usize> = (0..texts.len()).filter(|&i| encoded[i].is_none()).collect();
    if !missing.is_empty() {
        let read: Vec<aegis_engine::Result<Vec<Vec<f32>>>> = match guard.encoder() {
            Some(encoder) => {
                let batch: Vec<&str> = missing.iter().map(|&i| texts[i]).collect();
                let reading = EncoderReading {
                    layers: layers.clone(),
                    embedding: true,
                };
                encoder
                    .read_batch(&batch, &reading)
                    .into_iter()
                    .map(|r| {
                        r.map(|output| {
                            let mut rows = vec![output.embedding.unwrap_or_default()];
                            rows.extend(output.layer_means);
                            rows
                        })
                    })
                    .collect()
            }
            None => {
                let batch: Vec<_> = missing.iter().map(|&i| encoding_prompt(texts[i])).collect();
                guard
                    .model()
                    .encode_batch(&batch, &layers)
                    .into_iter()
                    .map(|r| r.map(|e| e.means))
                    .collect()
            }
        };
        for (&i, result) in missing.iter().zip(read) {
            encoded[i] = Some(result.map_err(GuardError::from));
            if let (Some(cache), Some(Ok(rows))) = (cache, &encoded[i]) {
                cache.put(&cache.path(guard, texts[i], false), LAYERS_MAGIC, rows);
            }
        }
    }
    texts
        .iter()
        .zip(encoded)
        .map(|(text, rows)| {
            let mut layers = rows.unwrap_or(Err(GuardError::EmptyText))?;
            let embedding = embedded.then(|| layers.remove(0));
            let prompt_scores = if prompts {
                Some(prompt_scores(guard, text, cache)?)
            } else {
                None
            };
            Ok(MessageFeatures {
                layers,
                embedding,
                prompt_scores,
            })
        })
        .collect()
}

fn prompt_scores(guard: &Guard, text: &str, cache: Option<&FeatureCache>) -> Result<Vec<f32>> {
    let path = cache.map(|c| (c, c.path(guard, text, true)));
    if let Some((cache, path)) = &path {
        if let Some(mut rows) = cache.get(path, PROMPTS_MAGIC) {
            if rows.len() == 1 && rows[0].len() == guard.validators().len() {
                return Ok(rows.remove(0));
            }
        }
    }
    let prompts: Vec<_> = guard.validators().iter().map(|v| v.prompt(text)).collect();
    let scores: Vec<f32> = guard
        .model()
        .score(&prompts)?
        .answers
        .iter()
        .map(|a| a.p_yes)
        .collect();
    if let Some((cache, path)) = &path {
        cache.put(path, PROMPTS_MAGIC, std::slice::from_ref(&scores));
    }
    Ok(scores)
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
    /// The prompt's P(Yes) on the same rows, when prompt scores were computed (no training, so
    /// no folds needed).
    pub prompt: Option<ScoringQuality>,
    /// Each candidate set of layers, cross-validated at the screening strength.
    pub tried: Vec<(Vec<usize>, Trained)>,
    /// The chosen layers, retrained with the strength chosen by cross-validation.
    pub chosen: Trained,
    /// The head to ship.
    pub head: Head,
    /// Whether each training row (in order) is benign traffic: every label of the row false.
    pub benign: Vec<bool>,
    /// The training rows' labels, in order.
    pub labels: Vec<bool>,
    /// Each training row's group for validation by source ([`LabelledMessage::source_group`]).
    pub groups: Vec<String>,
}

/// How `train_validator` searches.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerSearch {
    /// Candidate layer sets (each one layer, or a concatenation).
    pub candidates: Vec<Vec<usize>>,
    /// L2 strength the candidates are compared at; the winner then gets the full search.
    pub screen_alpha: f64,
}

/// Trains the head of validator `key` on the messages labelled for it (`None` labels skipped).
/// `features[i]` belongs to `messages[i]`.
pub fn train_validator(
    guard: &Guard,
    key: &str,
    messages: &[LabelledMessage],
    features: &[MessageFeatures],
    search: &LayerSearch,
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
    let layer_count = match guard.encoder() {
        Some(encoder) => encoder.info().layers,
        None => guard.model().info().layers,
    };
    if guard.encoder().is_none() && search.candidates.iter().any(Vec::is_empty) {
        return Err(failed(
            "the embedding is a candidate only for heads on a sentence encoder".into(),
        ));
    }
    if let Some(bad) = search
        .candidates
        .iter()
        .flatten()
        .find(|&&l| l == 0 || l > layer_count)
    {
        return Err(failed(format!(
            "no layer {bad}: the model has layers 1 to {layer_count}"
        )));
    }
    let rows: Vec<(&LabelledMessage, &MessageFeatures, bool)> = messages
        .iter()
        .zip(features)
        .filter_map(|(m, f)| m.label(key).map(|label| (m, f, label)))
        .collect();
    let languages: Vec<String> = rows.iter().map(|(m, _, _)| m.language()).collect();
    let labels: Vec<bool> = rows.iter().map(|(_, _, l)| *l).collect();
    let prompt = rows
        .iter()
        .map(|(_, f, _)| {
            f.prompt_scores
                .as_ref()
                .map(|scores| f64::from(scores[slot]))
        })
        .collect::<Option<Vec<f64>>>()
        .map(|scores| quality(&scores, &labels, &languages));
    let examples = |layers: &[usize]| -> Vec<Example> {
        rows.iter()
            .zip(&languages)
            .map(|((m, f, label), language)| Example {
                features: f.input(layers),
                label: *label,
                language: language.clone(),
                group: m.source_group(),
            })
            .collect()
    };
    let screen = TrainOptions {
        alphas: vec![search.screen_alpha],
        ..options.clone()
    };
    let mut tried = Vec::new();
    for layers in &search.candidates {
        let trained = train(&examples(layers), &screen).map_err(|e| failed(e.to_string()))?;
        tracing::info!(validator = key, layers = %candidate_label(layers), auc = ?trained.cv.roc_auc, "layer candidate");
        tried.push((layers.clone(), trained));
    }
    let best_layers = cheapest_of_the_best(
        tried
            .iter()
            .map(|(layers, trained)| (layers.as_slice(), trained.cv.roc_auc)),
        layer_count,
    )
    .ok_or_else(|| failed("no candidate layers to train on".into()))?;
    let chosen = train(&examples(&best_layers), options).map_err(|e| failed(e.to_string()))?;
    let (features, model) = match guard.encoder() {
        Some(encoder) => (
            Features {
                encoder: Encoder::EmbeddingGemma,
                layers: best_layers,
                context_hash: encoder_context_hash(encoder.info()),
            },
            ModelBinding {
                id: encoder.info().id.clone(),
                content_hash: encoder.info().content_hash.clone(),
            },
        ),
        None => (
            Features {
                encoder: Encoder::Decoder,
                layers: best_layers,
                context_hash: encoding_context_hash(),
            },
            ModelBinding {
                id: guard.model().info().id.clone(),
                content_hash: guard.model().info().content_hash.clone(),
            },
        ),
    };
    let head = Head {
        format: HEAD_FORMAT,
        validator: key.to_string(),
        features,
        model,
        training: TrainingRecord {
            data_sha256: rows_hash(rows.iter().map(|(m, _, l)| (m.text.as_str(), *l))),
            rows: rows.len(),
            positives: labels.iter().filter(|&&l| l).count(),
            alpha: chosen.alpha,
            folds: chosen.folds,
            validation: chosen.validation,
            cv: chosen.cv.clone(),
            cv_by_language: chosen.cv_by_language.clone(),
            random_folds_cv: chosen.random_folds.as_ref().map(|r| r.cv.clone()),
            threshold: None,
        },
        weights: chosen.weights.clone(),
        bias: chosen.bias,
    };
    Ok(ValidatorTraining {
        key: key.to_string(),
        prompt,
        tried,
        chosen,
        head,
        benign: rows.iter().map(|(m, _, _)| m.is_benign()).collect(),
        labels,
        groups: rows.iter().map(|(m, _, _)| m.source_group()).collect(),
    })
}

/// Candidates whose cross-validated AUC is within this of the best are not told apart: the report
/// prints AUC to three decimals, and a difference it cannot show is not worth a deeper pass.
const AUC_TIE: f64 = 1e-3;

/// The candidate to ship: among those within [`AUC_TIE`] of the best AUC, the one whose deepest
/// layer is shallowest (the shared encoding stops after the deepest layer any head reads, so a
/// shallower head makes every verdict cheaper; the embedding costs all `total` layers); then the
/// earlier candidate.
fn cheapest_of_the_best<'a>(
    candidates: impl Iterator<Item = (&'a [usize], Option<f64>)> + Clone,
    total: usize,
) -> Option<Vec<usize>> {
    let auc = |a: Option<f64>| a.unwrap_or(f64::NEG_INFINITY);
    let best = candidates.clone().map(|(_, a)| auc(a)).reduce(f64::max)?;
    candidates
        .filter(|(_, a)| auc(*a) >= best - AUC_TIE)
        .min_by_key(|(layers, _)| layers.iter().max().copied().unwrap_or(total))
        .map(|(layers, _)| layers.to_vec())
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
        let rows = vec![vec![1.0, 2.0, 3.0], vec![4.0, 5.0, 6.0]];
        let bytes = floats_to_bytes(LAYERS_MAGIC, &rows);
        assert_eq!(floats_from_bytes(LAYERS_MAGIC, &bytes), Some(rows));
        assert_eq!(
            floats_from_bytes(LAYERS_MAGIC, &bytes[..bytes.len() - 4]),
            None
        );
        assert_eq!(floats_from_bytes(PROMPTS_MAGIC, &bytes), None);
        assert_eq!(floats_from_bytes(LAYERS_MAGIC, b"garbage"), None);
    }

    #[test]
    fn layer_choice_prefers_the_shallower_of_indistinguishable_candidates() {
        let pick = |candidates: &[(&[usize], Option<f64>)]| {
            cheapest_of_the_best(candidates.iter().copied(), 24)
        };
        // 11 is best by less than the tie: 6 is as good and cheaper.
        assert_eq!(
            pick(&[
                (&[6], Some(0.9995)),
                (&[8], Some(0.9991)),
                (&[11], Some(0.9999))
            ]),
            Some(vec![6])
        );
        // A real difference wins over cost.
        assert_eq!(
            pick(&[
                (&[6], Some(0.985)),
                (&[8], Some(0.987)),
                (&[11], Some(0.985))
            ]),
            Some(vec![8])
        );
        // A concatenation costs its deepest layer; equal cost keeps the earlier candidate.
        assert_eq!(
            pick(&[
                (&[8, 12], Some(0.95)),
                (&[12], Some(0.95)),
                (&[10], Some(0.9495))
            ]),
            Some(vec![10])
        );
        assert_eq!(pick(&[(&[4], None), (&[2], Some(0.7))]), Some(vec![2]));
        // An encoder's embedding (no layers) costs every layer.
        assert_eq!(
            pick(&[(&[], Some(0.9700)), (&[12], Some(0.9695))]),
            Some(vec![12])
        );
        assert_eq!(
            pick(&[(&[], Some(0.975)), (&[12], Some(0.960))]),
            Some(vec![])
        );
        assert_eq!(pick(&[]), None);
    }

    #[test]
    fn head_inputs_concatenate_layers_in_order() {
        let features = MessageFeatures {
            layers: vec![vec![1.0], vec![2.0], vec![3.0]],
            embedding: Some(vec![9.0]),
            prompt_scores: None,
        };
        assert_eq!(features.input(&[3, 1]), vec![3.0, 1.0]);
        assert_eq!(features.input(&[]), vec![9.0]);
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
        assert!(!row.is_benign(), "an unknown label is not a benign row");
        let benign: LabelledMessage =
            serde_json::from_str(r#"{"text":"makasih kak","labels":{"spam":false,"toxic":false}}"#)
                .expect("valid row");
        assert!(benign.is_benign());
    }

    #[test]
    fn authored_rows_group_by_language_and_kind_and_others_by_source() {
        let row =
            |json: &str| -> LabelledMessage { serde_json::from_str(json).expect("valid row") };
        let insult = row(
            r#"{"text":"dasar bodoh","lang":"id","labels":{"toxic":true,"harassment":true,"spam":null},"source":"aegis_authored"}"#,
        );
        assert_eq!(insult.source_group(), "aegis_authored:id:harassment+toxic");
        let thanks = row(
            r#"{"text":"makasih","lang":"id","labels":{"toxic":false},"source":"aegis_authored"}"#,
        );
        assert_eq!(thanks.source_group(), "aegis_authored:id:benign");
        let ack = row(
            r#"{"text":"okee","lang":"id","labels":{"toxic":false},"source":"aegis_authored","kind":"short-reply"}"#,
        );
        assert_eq!(ack.source_group(), "aegis_authored:id:short-reply");
        let sms = row(
            r#"{"text":"hi","lang":"en","labels":{"spam":false},"source":"sms_spam_collection"}"#,
        );
        assert_eq!(sms.source_group(), "sms_spam_collection");
        let unknown = row(r#"{"text":"hi","labels":{"spam":false}}"#);
        assert_eq!(unknown.source_group(), "(no source)");
    }
}
