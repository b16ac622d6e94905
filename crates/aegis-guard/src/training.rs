//! Training validators' heads from labelled messages: per validator, the layers (or the encoder's
//! embedding) that cross-validate best on the features `features` reads, and a head on them.

use std::collections::BTreeMap;

use aegis_heads::{
    candidate_label, cv_metrics, metrics_by_language, train, train_with_attention, CvMetrics,
    Encoder, Example, Features, Head, ModelBinding, QueryChoice, QueryOptions, TrainOptions,
    Trained, TrainingRecord, HEAD_FORMAT,
};
use serde::{Deserialize, Serialize};

use crate::error::{GuardError, Result};
use crate::features::MessageFeatures;
use crate::guard::Guard;
use crate::heads::{encoder_context_hash, encoding_context_hash};
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

/// The id prefix of rows that are a prompt author's taught examples (`example:ID`).
pub const TAUGHT_ID_PREFIX: &str = "example:";

impl LabelledMessage {
    /// Whether the row is one an author taught (rather than a row of the shipped data).
    pub fn is_taught(&self) -> bool {
        self.id
            .as_deref()
            .is_some_and(|id| id.starts_with(TAUGHT_ID_PREFIX))
    }

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
    /// With [`LayerSearch::pooling`], how a query over the token states did against the mean on
    /// held-out folds; the head pools only where it did better.
    pub query_choice: Option<QueryChoice>,
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
    /// Also a query over the encoder's token states, trained as these options say, in place of
    /// the sentence embedding where held-out folds say it reads better (the only candidate must
    /// then be the embedding, and every row's features must hold its token states).
    pub pooling: Option<QueryOptions>,
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
    if search.pooling.is_some() && search.candidates != [Vec::<usize>::new()] {
        return Err(failed(
            "a pooling replaces the sentence embedding: its only candidate is the embedding".into(),
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
    let detected: Vec<&str> = rows
        .iter()
        .map(|(m, _, _)| Language::detect(&m.text).code())
        .collect();
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
            .zip(languages.iter().zip(&detected))
            .map(|((m, f, label), (language, detected))| Example {
                features: f.input(layers),
                label: *label,
                language: language.clone(),
                detected_language: detected.to_string(),
                group: m.source_group(),
                taught: m.is_taught(),
            })
            .collect()
    };
    // Candidates are told apart by their linear maps: a hidden layer on each would train it
    // once more per candidate (not measured whether it would choose other layers).
    let screen = TrainOptions {
        alphas: vec![search.screen_alpha],
        hidden: None,
        ..options.clone()
    };
    // One candidate needs no screening: it is the choice.
    let mut tried = Vec::new();
    for layers in search
        .candidates
        .iter()
        .filter(|_| search.candidates.len() > 1)
    {
        let trained = train(&examples(layers), &screen).map_err(|e| failed(e.to_string()))?;
        tracing::info!(validator = key, layers = %candidate_label(layers), auc = ?trained.cv.roc_auc, "layer candidate");
        tried.push((layers.clone(), trained));
    }
    let best_layers = match search.candidates.as_slice() {
        [only] => only.clone(),
        _ => cheapest_of_the_best(
            tried
                .iter()
                .map(|(layers, trained)| (layers.as_slice(), trained.cv.roc_auc)),
            layer_count,
        )
        .ok_or_else(|| failed("no candidate layers to train on".into()))?,
    };
    let (chosen, pooling, query_choice) = match &search.pooling {
        None => (
            train(&examples(&best_layers), options).map_err(|e| failed(e.to_string()))?,
            None,
            None,
        ),
        Some(query_options) => {
            let attended = train_attended(guard, &rows, &examples(&[]), options, query_options)
                .map_err(failed)?;
            let choice = attended.choice.clone();
            tracing::info!(
                validator = key,
                mean_auc = choice.mean_roc_auc,
                attention_auc = choice.attention_roc_auc,
                kept = attended.chosen.is_some(),
                "attention query"
            );
            match attended.chosen {
                Some((pooling, trained)) => (trained, Some(pooling), Some(choice)),
                None => (
                    train(&examples(&best_layers), options).map_err(|e| failed(e.to_string()))?,
                    None,
                    Some(choice),
                ),
            }
        }
    };
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
                fingerprint: guard
                    .encoder_fingerprint()
                    .transpose()
                    .map_err(|e| failed(e.to_string()))?,
            },
        ),
        None => (
            Features {
                encoder: Encoder::Decoder,
                layers: best_layers,
                context_hash: encoding_context_hash(guard.model().info().chat_format),
            },
            ModelBinding {
                id: guard.model().info().id.clone(),
                content_hash: guard.model().info().content_hash.clone(),
                fingerprint: None,
            },
        ),
    };
    let head = Head {
        format: HEAD_FORMAT,
        pooling,
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
            out_of_fold: None,
            hidden: chosen.hidden.as_ref().and(options.hidden.clone()),
            by_language: options.by_language,
            features_arithmetic: Some(match guard.encoder() {
                Some(encoder) => encoder.info().weight_format.clone(),
                None => guard.model().info().weight_format.clone(),
            }),
        },
        weights: chosen.weights.clone(),
        bias: chosen.bias,
        hidden: chosen.hidden.clone(),
        languages: chosen.languages.clone(),
        language_rule: chosen.language_rule,
        readings: Vec::new(),
        content_hash: String::new(),
    };
    Ok(ValidatorTraining {
        key: key.to_string(),
        prompt,
        tried,
        chosen,
        query_choice,
        head,
        benign: rows.iter().map(|(m, _, _)| m.is_benign()).collect(),
        labels,
        groups: rows.iter().map(|(m, _, _)| m.source_group()).collect(),
    })
}

/// The query and the head on what it pools ([`train_with_attention`]), from each row's token
/// states; `examples` are the rows' examples on the embedding (their features are replaced).
fn train_attended(
    guard: &Guard,
    rows: &[(&LabelledMessage, &MessageFeatures, bool)],
    examples: &[Example],
    options: &TrainOptions,
    query_options: &QueryOptions,
) -> std::result::Result<aegis_heads::AttendedTraining, String> {
    let encoder = guard
        .encoder()
        .ok_or("a pooling reads a sentence encoder's token states, and none is loaded")?;
    let tokens: Vec<&[f32]> = rows
        .iter()
        .map(|(m, f, _)| {
            f.token_states
                .as_deref()
                .ok_or_else(|| format!("no token states were read for {:?}", m.text))
        })
        .collect::<std::result::Result<_, _>>()?;
    train_with_attention(
        examples,
        &tokens,
        encoder.info().dimensions,
        options,
        query_options,
    )
    .map_err(|e| e.to_string())
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
