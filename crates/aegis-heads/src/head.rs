//! The head artefact: a JSON file next to its validator's template, bound to one model and to the
//! preamble the message is encoded after (never to the policy text: heads do not read it).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::attention::AttentionPooling;
use crate::error::{HeadError, Result};
use crate::fingerprint::EncoderFingerprint;
use crate::hidden::HiddenLayer;
use crate::reading::Reading;
use crate::record::TrainingRecord;

mod language_map;
mod logit;

pub(crate) use language_map::probability_by_rule;
pub use language_map::{LanguageMap, LanguageRule};
pub(crate) use logit::{linear_probability, probability_with, sigmoid};

/// Version of the file layout; a reader refuses layouts it does not know. Format 1 heads read
/// the final hidden state inside a validator's own prompt; format 2 heads read chosen layers of
/// one shared encoding of the message.
pub const HEAD_FORMAT: u32 = 2;

/// Which model's reading of the message a head takes as input.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Encoder {
    /// The guard's own model (the decoder): mean hidden states after chosen layers.
    #[default]
    Decoder,
    /// EmbeddingGemma: its sentence embedding (mean pooling, dense projections, normalised), or
    /// the mean of its residual stream after chosen layers, which stops the pass there.
    EmbeddingGemma,
}

impl Encoder {
    pub fn is_decoder(&self) -> bool {
        *self == Self::Decoder
    }

    /// The name `aegis train --encoder` takes and reports print.
    pub fn name(self) -> &'static str {
        match self {
            Self::Decoder => "decoder",
            Self::EmbeddingGemma => "embeddinggemma",
        }
    }
}

/// What a head reads. From the decoder: the mean over the message's tokens of the hidden state
/// after each of `layers`, concatenated in that order, with the message encoded after a fixed
/// preamble. From EmbeddingGemma, the message after its task prompt: the mean over every token of
/// the residual stream after each of `layers`, or with `layers` empty its sentence embedding.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Features {
    /// Absent in files means the decoder (heads written before encoders existed).
    #[serde(default, skip_serializing_if = "Encoder::is_decoder")]
    pub encoder: Encoder,
    /// 1 = after the first transformer layer.
    pub layers: Vec<usize>,
    /// sha256 of the preamble (decoder) or task prompt (encoder) the message was read after;
    /// another one reads differently.
    pub context_hash: String,
}

impl Features {
    /// `8+12` style for layers, `embedding` for an encoder's sentence embedding, for reports.
    pub fn label(&self) -> String {
        candidate_label(&self.layers)
    }
}

/// A training candidate's name: `8+12` for layers 8 and 12, `embedding` for none (an encoder's
/// sentence embedding).
pub fn candidate_label(layers: &[usize]) -> String {
    if layers.is_empty() {
        "embedding".to_string()
    } else {
        layers_label(layers)
    }
}

/// `8+12` for layers 8 and 12.
fn layers_label(layers: &[usize]) -> String {
    layers
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join("+")
}

/// The model whose hidden states a head was trained on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelBinding {
    pub id: String,
    /// sha256 of the weights; a head is used only with exactly these weights.
    pub content_hash: String,
    /// The encoder's embeddings of fixed probe texts, so an encoder on a server, whose weights
    /// cannot be hashed here, can be checked against the one the head was trained on. Absent
    /// for heads on the decoder and heads written before servers could embed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<EncoderFingerprint>,
}

/// The input of a reading that reads other layers than its head: their means, concatenated, or
/// why they are not at hand.
pub type LayersInput<'a> = dyn Fn(&[usize]) -> std::result::Result<Vec<f32>, String> + 'a;

/// A trained head. Standardisation, the logistic regression and the calibration are folded into
/// one linear map, so scoring is a dot product: `p = sigmoid(weights · x + bias)`; with a
/// `hidden` layer its output is added inside the sigmoid; with `readings`, the highest of their
/// maps and its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Head {
    pub format: u32,
    pub validator: String,
    pub features: Features,
    pub model: ModelBinding,
    pub training: TrainingRecord,
    /// With a pooling, the head reads its attention-pooled embedding of the message's token
    /// states (issue 64) instead of the encoder's sentence embedding; absent, the sentence
    /// embedding or layer means as `features` says. A reader that does not know the field
    /// refuses the file rather than read the mean.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pooling: Option<AttentionPooling>,
    pub weights: Vec<f32>,
    pub bias: f32,
    /// A residual ReLU layer on the same input (issue 64); absent in a linear head. A reader
    /// that does not know the field refuses the file rather than score without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden: Option<HiddenLayer>,
    /// Maps of their own for the messages of some languages (issue 64), each in place of the
    /// head's own map for a message the guard detects in that language; the head's own map (the
    /// part every row taught) scores the rest. Readings apply alike to every language.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub languages: Vec<LanguageMap>,
    /// Which of `languages` scores a message.
    #[serde(default, skip_serializing_if = "LanguageRule::is_detected")]
    pub language_rule: LanguageRule,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub readings: Vec<Reading>,
    /// sha256 of the bytes the head was read from (hex), so a verdict can name the head version
    /// that decided it; empty for a head not read from a file.
    #[serde(skip)]
    pub content_hash: String,
}

impl Head {
    pub fn load(path: &Path) -> Result<Self> {
        let raw = std::fs::read(path).map_err(|source| HeadError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_bytes(&raw, path)
    }

    /// A head from a file's bytes, checked as [`Head::load`] checks it; `path` names it in errors.
    pub fn from_bytes(raw: &[u8], path: &Path) -> Result<Self> {
        let invalid = |message: String| HeadError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        let mut head: Head = serde_json::from_slice(raw).map_err(|e| invalid(e.to_string()))?;
        head.content_hash = {
            use sha2::Digest;
            sha2::Sha256::digest(raw)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect()
        };
        if head.format != HEAD_FORMAT {
            return Err(invalid(format!(
                "format {} is not the supported {HEAD_FORMAT}; retrain it with `aegis train`",
                head.format
            )));
        }
        if head.features.layers.contains(&0) {
            return Err(invalid("it names layer 0 (layers count from 1)".into()));
        }
        if head.features.encoder.is_decoder() && head.features.layers.is_empty() {
            return Err(invalid("it names no layers of the model to read".into()));
        }
        if head.weights.is_empty()
            || !head.bias.is_finite()
            || head.weights.iter().any(|w| !w.is_finite())
        {
            return Err(invalid("weights are empty or not finite".into()));
        }
        if let Some(pooling) = &head.pooling {
            if head.features.encoder.is_decoder() || !head.features.layers.is_empty() {
                return Err(invalid(
                    "it pools token states but reads the decoder or layer means (a pooling \
                     reads the encoder's final states)"
                        .into(),
                ));
            }
            pooling.check(head.weights.len()).map_err(invalid)?;
        }
        if let Some(hidden) = &head.hidden {
            hidden.check(head.weights.len()).map_err(invalid)?;
        }
        for (at, map) in head.languages.iter().enumerate() {
            if head.languages[..at]
                .iter()
                .any(|m| m.language == map.language)
            {
                return Err(invalid(format!("language {:?} has two maps", map.language)));
            }
            map.check(head.weights.len()).map_err(invalid)?;
        }
        for reading in &head.readings {
            if let Some(layers) = &reading.layers {
                if layers.is_empty() || layers.contains(&0) || head.features.encoder.is_decoder() {
                    return Err(invalid(format!(
                        "reading {:?} names no layers, layer 0, or layers of the decoder (a \
                         reading reads the encoder's layers, counted from 1)",
                        reading.name
                    )));
                }
            }
            if (reading.layers.is_none() && reading.weights.len() != head.weights.len())
                || !reading.bias.is_finite()
                || reading.weights.iter().any(|w| !w.is_finite())
            {
                return Err(invalid(format!(
                    "reading {:?} has weights of another width or not finite",
                    reading.name
                )));
            }
        }
        Ok(head)
    }

    /// The file's bytes: pretty JSON and a final newline.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut json = serde_json::to_vec_pretty(self).map_err(|e| HeadError::Invalid {
            path: PathBuf::from(format!("{}.json", self.validator)),
            message: e.to_string(),
        })?;
        json.push(b'\n');
        Ok(json)
    }

    /// Writes the head atomically: a crash never leaves half a file where a head was.
    pub fn save(&self, path: &Path) -> Result<()> {
        aegis_files::write_atomically(path, &self.to_bytes()?).map_err(|e| HeadError::Write {
            path: e.path,
            source: e.source,
        })
    }

    /// Calibrated probability that the features show a violation; with readings, the highest of
    /// theirs and the head's (each aligned to the head's threshold). `input` is the head's own;
    /// `language` (a code, `id` or `en`) is the one the guard detects in the message and picks
    /// its language's map where the head has one; `layers_input` gives a reading that reads
    /// other layers the means of those.
    pub fn probability(
        &self,
        input: &[f32],
        language: &str,
        layers_input: &LayersInput,
    ) -> Result<f32> {
        let mut p =
            probability_by_rule(&self.languages, self.language_rule, language, input, || {
                probability_with(&self.weights, self.bias, self.hidden.as_ref(), input)
            })?;
        for reading in &self.readings {
            let own;
            let features = match &reading.layers {
                Some(layers) => {
                    own = layers_input(layers).map_err(|message| HeadError::ReadingInput {
                        reading: reading.name.clone(),
                        message,
                    })?;
                    &own
                }
                None => input,
            };
            p = p.max(linear_probability(
                &reading.weights,
                reading.bias,
                features,
            )?);
        }
        Ok(p as f32)
    }

    /// The encoder layers the head's readings read besides the head's own input.
    pub fn reading_layers(&self) -> impl Iterator<Item = usize> + '_ {
        self.readings
            .iter()
            .flat_map(|r| r.layers.iter().flatten().copied())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::reading::logit;
    use crate::record::{CvMetrics, Validation};
    use std::collections::BTreeMap;

    pub(super) fn no_layers(_: &[usize]) -> std::result::Result<Vec<f32>, String> {
        Err("no reading here reads other layers".into())
    }

    pub(crate) fn head() -> Head {
        Head {
            format: HEAD_FORMAT,
            validator: "spam".into(),
            features: Features {
                encoder: Encoder::Decoder,
                layers: vec![8],
                context_hash: "cd".into(),
            },
            model: ModelBinding {
                id: "m".into(),
                content_hash: "ab".into(),
                fingerprint: None,
            },
            training: TrainingRecord {
                data_sha256: "ef".into(),
                rows: 10,
                positives: 5,
                alpha: 1.0,
                folds: 5,
                cv: CvMetrics {
                    rows: 10,
                    positives: 5,
                    roc_auc: Some(0.9),
                    precision: 1.0,
                    recall: 0.8,
                    f1: 0.89,
                },
                cv_by_language: BTreeMap::new(),
                validation: Validation::BySource,
                random_folds_cv: None,
                threshold: None,
                out_of_fold: None,
                hidden: None,
                by_language: false,
                features_arithmetic: None,
            },
            pooling: None,
            weights: vec![1.0, -2.0],
            bias: 0.5,
            hidden: None,
            languages: Vec::new(),
            language_rule: LanguageRule::Detected,
            readings: Vec::new(),
            content_hash: String::new(),
        }
    }

    #[test]
    fn a_reading_fails_at_the_heads_threshold_where_it_fails_at_its_own() {
        let mut with_reading = head();
        let training = with_reading.training.clone();
        // On its own the reading says sigmoid(x0 - 1); it was tuned to fail at 0.6.
        with_reading.readings.push(Reading::aligned(
            "contempt".into(),
            training,
            None,
            vec![1.0, 0.0],
            -1.0,
            0.6,
            0.25,
        ));
        let own = |x0: f64| sigmoid(x0 - 1.0);
        // Exactly at its own threshold it scores the head's (x1 = 3 keeps the head's map low).
        let at = 1.0 + logit(0.6);
        let p = with_reading
            .probability(&[at as f32, 3.0], "en", &no_layers)
            .expect("width");
        assert!((f64::from(p) - 0.25).abs() < 1e-5, "{p}");
        for x0 in [-3.0f32, 0.0, 1.0, 1.5, 4.0, 6.0] {
            let p = f64::from(
                with_reading
                    .probability(&[x0, 3.0], "en", &no_layers)
                    .expect("width"),
            );
            let head_alone = f64::from(
                head()
                    .probability(&[x0, 3.0], "en", &no_layers)
                    .expect("width"),
            );
            assert!(p >= head_alone - 1e-7, "never below the head's own score");
            assert_eq!(p >= 0.25, own(f64::from(x0)) >= 0.6 || head_alone >= 0.25);
        }
        // Moved to another head threshold, it fails the same messages at that one.
        let moved = with_reading.readings[0].realigned(0.5);
        let z = |r: &Reading, x0: f32| linear_probability(&r.weights, r.bias, &[x0, 3.0]);
        for x0 in [0.0f32, 1.0, 1.5, 4.0] {
            let before = z(&with_reading.readings[0], x0).expect("width") >= 0.25;
            assert_eq!(z(&moved, x0).expect("width") >= 0.5, before, "at {x0}");
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("spam.json");
        with_reading.save(&path).expect("save");
        let loaded = Head::load(&path).expect("load");
        assert_eq!(loaded.readings, with_reading.readings);
        with_reading.readings[0].weights.push(1.0);
        with_reading.save(&path).expect("save");
        let err = Head::load(&path).unwrap_err().to_string();
        assert!(err.contains("reading \"contempt\""), "{err}");
    }

    /// A reading that names its own layers scores their means, not the head's input, and a file
    /// whose reading names layer 0 is refused.
    #[test]
    fn a_reading_of_other_layers_reads_their_means() {
        let mut with_reading = head();
        let training = with_reading.training.clone();
        with_reading.features.encoder = Encoder::EmbeddingGemma;
        with_reading.readings.push(Reading::aligned(
            "contempt".into(),
            training,
            Some(vec![16]),
            vec![1.0, 1.0, 1.0],
            0.0,
            0.5,
            0.5,
        ));
        let asked = std::cell::RefCell::new(Vec::new());
        let layers_input = |layers: &[usize]| -> std::result::Result<Vec<f32>, String> {
            asked.borrow_mut().push(layers.to_vec());
            Ok(vec![3.0, 3.0, 3.0])
        };
        // The head's own map alone: sigmoid(0 - 2 * 5 + 0.5), far below; the reading: sigmoid(9).
        let p = with_reading
            .probability(&[0.0, 5.0], "en", &layers_input)
            .expect("widths");
        assert!((f64::from(p) - sigmoid(9.0)).abs() < 1e-6, "{p}");
        assert_eq!(asked.into_inner(), vec![vec![16]]);
        let failing = |_: &[usize]| -> std::result::Result<Vec<f32>, String> {
            Err("the encoder did not read layer 16".into())
        };
        let err = with_reading
            .probability(&[0.0, 5.0], "en", &failing)
            .unwrap_err();
        assert!(err.to_string().contains("layer 16"), "{err}");
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("toxic.json");
        with_reading.save(&path).expect("save");
        assert_eq!(
            Head::load(&path).expect("load").readings,
            with_reading.readings
        );
        assert_eq!(with_reading.reading_layers().collect::<Vec<_>>(), vec![16]);
        with_reading.readings[0].layers = Some(vec![0]);
        with_reading.save(&path).expect("save");
        let err = Head::load(&path).unwrap_err().to_string();
        assert!(err.contains("layer 0"), "{err}");
    }

    /// A hidden layer's output is added inside the sigmoid; its file round-trips, and a layer of
    /// another width is refused when the head is read.
    #[test]
    fn a_hidden_layer_adds_to_the_logit_and_is_checked_when_read() {
        let mut with_hidden = head();
        with_hidden.hidden = Some(HiddenLayer {
            weights: vec![1.0, 0.0, 0.0, -1.0],
            bias: vec![0.0, 0.5],
            out: vec![2.0, 1.0],
        });
        // linear: 1 - 2 * 1 + 0.5 = -0.5; units: relu(1) * 2 + relu(-1 + 0.5) * 1 = 2
        let p = with_hidden
            .probability(&[1.0, 1.0], "en", &no_layers)
            .expect("width");
        assert!((f64::from(p) - sigmoid(1.5)).abs() < 1e-6, "{p}");
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("toxic.json");
        with_hidden.save(&path).expect("save");
        assert_eq!(Head::load(&path).expect("load").hidden, with_hidden.hidden);
        if let Some(layer) = with_hidden.hidden.as_mut() {
            layer.weights.pop();
        }
        with_hidden.save(&path).expect("save");
        let err = Head::load(&path).unwrap_err().to_string();
        assert!(err.contains("hidden layer"), "{err}");
    }

    #[test]
    fn probability_is_the_folded_linear_map() {
        let p = head()
            .probability(&[1.0, 1.0], "en", &no_layers)
            .expect("width matches");
        assert!((p as f64 - sigmoid(-0.5)).abs() < 1e-6);
        assert!(head().probability(&[1.0], "en", &no_layers).is_err());
        // Extreme inputs stay probabilities instead of overflowing.
        assert_eq!(
            head().probability(&[1e30, -1e30], "en", &no_layers).ok(),
            Some(1.0)
        );
    }

    #[test]
    fn round_trips_and_refuses_broken_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("heads/spam.json");
        head().save(&path).expect("save");
        let loaded = Head::load(&path).expect("load");
        use sha2::Digest;
        let digest = sha2::Sha256::digest(std::fs::read(&path).expect("read"));
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(loaded.content_hash, hex, "the file's sha256");
        assert_eq!(
            Head {
                content_hash: String::new(),
                ..loaded
            },
            head()
        );

        std::fs::write(&path, "{ not json").expect("write");
        let err = Head::load(&path).unwrap_err().to_string();
        assert!(err.contains("spam.json is not a valid head file"), "{err}");

        let mut future = head();
        future.format = 99;
        future.save(&path).expect("save");
        assert!(Head::load(&path)
            .unwrap_err()
            .to_string()
            .contains("format 99"));

        // A decoder head's file says nothing of encoders (files from before them stay valid); an
        // encoder head names its encoder, and layers when it reads no embedding.
        head().save(&path).expect("save");
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(!text.contains("encoder"), "{text}");
        let mut encoder_head = head();
        encoder_head.features.encoder = Encoder::EmbeddingGemma;
        encoder_head.features.layers.clear();
        encoder_head.save(&path).expect("save");
        let loaded = Head::load(&path).expect("load");
        assert_eq!(
            Head {
                content_hash: String::new(),
                ..loaded
            },
            encoder_head
        );
        assert_eq!(encoder_head.features.label(), "embedding");
        encoder_head.features.layers = vec![12];
        encoder_head.save(&path).expect("save");
        assert_eq!(Head::load(&path).expect("load").features.label(), "12");
        encoder_head.features.layers = vec![0];
        encoder_head.save(&path).expect("save");
        assert!(Head::load(&path).is_err(), "layer 0");
        let mut no_layers = head();
        no_layers.features.layers.clear();
        no_layers.save(&path).expect("save");
        assert!(Head::load(&path).is_err(), "a decoder head reading nothing");

        let mut broken = head();
        broken.weights[0] = f32::NAN;
        // NaN serialises as null, which is not a number: refused at parse time.
        broken.save(&path).expect("save");
        assert!(Head::load(&path).is_err());
    }
}
