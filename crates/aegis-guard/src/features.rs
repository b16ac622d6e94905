//! What training reads of each message: the mean after every layer up to the deepest candidate
//! (of the model's shared encoding, or of the sentence encoder), the encoder's embedding, and
//! optionally each validator's prompt score; cached on disk, since each costs a model call.

use std::path::{Path, PathBuf};

use aegis_engine::EncoderReading;
use sha2::{Digest, Sha256};

use crate::error::{GuardError, Result};
use crate::guard::Guard;
use crate::heads::{encoding_preamble, encoding_prompt};

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
    /// Each token's final state after the encoder's dense layers, row-major, for a head that
    /// pools them (`aegis_heads::AttentionPooling`); read apart from the cached features
    /// ([`message_token_states`]) and only when such a head is trained.
    pub token_states: Option<Vec<f32>>,
}

impl MessageFeatures {
    /// The head input for `layers`: their means concatenated in order; none is the embedding.
    /// A layer not read gives an empty input, which the head refuses by its width.
    pub fn input(&self, layers: &[usize]) -> Vec<f32> {
        if layers.is_empty() {
            return self.embedding.clone().unwrap_or_default();
        }
        self.layers_input(layers).unwrap_or_default()
    }

    /// The means after `layers` concatenated, or which layer was not read.
    pub fn layers_input(&self, layers: &[usize]) -> Result<Vec<f32>, String> {
        let mut input = Vec::new();
        for &layer in layers {
            let mean = layer
                .checked_sub(1)
                .and_then(|i| self.layers.get(i))
                .ok_or_else(|| format!("layer {layer} was not read"))?;
            input.extend_from_slice(mean);
        }
        Ok(input)
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
            hasher.update(encoding_preamble(guard.model().info().chat_format).as_bytes());
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

    /// Whether the message's hidden-state features are cached (so reading it costs no model run).
    pub fn holds(&self, guard: &Guard, text: &str) -> bool {
        self.path(guard, text, false).exists()
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

/// Each text's token states after the encoder's dense layers
/// ([`MessageFeatures::token_states`]). Not cached: a message's states take its length times the
/// embedding's room, and only training a pooling head reads them.
pub fn message_token_states(guard: &Guard, texts: &[&str]) -> Vec<Result<Vec<f32>>> {
    let Some(encoder) = guard.encoder() else {
        return texts
            .iter()
            .map(|_| {
                Err(GuardError::Training {
                    key: String::new(),
                    message: "token states come from a sentence encoder, and none is loaded".into(),
                })
            })
            .collect();
    };
    let reading = EncoderReading {
        layers: Vec::new(),
        embedding: false,
        token_states: true,
    };
    encoder
        .read_batch(texts, &reading)
        .into_iter()
        .map(|read| {
            read.map_err(GuardError::from)?
                .token_states
                .ok_or_else(|| GuardError::Training {
                    key: String::new(),
                    message: "the encoder returned no token states".into(),
                })
        })
        .collect()
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
                    token_states: false,
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
                let format = guard.model().info().chat_format;
                let batch: Vec<_> = missing
                    .iter()
                    .map(|&i| encoding_prompt(format, texts[i]))
                    .collect();
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
                token_states: None,
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
    fn head_inputs_concatenate_layers_in_order() {
        let features = MessageFeatures {
            layers: vec![vec![1.0], vec![2.0], vec![3.0]],
            embedding: Some(vec![9.0]),
            prompt_scores: None,
            token_states: None,
        };
        assert_eq!(features.input(&[3, 1]), vec![3.0, 1.0]);
        assert_eq!(features.input(&[]), vec![9.0]);
    }
}
