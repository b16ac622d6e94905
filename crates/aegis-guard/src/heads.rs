//! Which learned head, if any, decides each validator: `prompt_guard/heads/<key>.json` for heads on
//! the sentence encoder (the default), `prompt_guard/heads/decoder/<key>.json` for heads on the
//! model's hidden states; each is used only with the exact weights it was trained on and the
//! shared encoding's preamble.
//!
//! Heads read one encoding of the message shared by every validator (a fixed preamble, then the
//! message), never a validator's own prompt: the message is read once per verdict however many
//! validators there are, and editing a policy's wording leaves its head bound.

use std::path::{Path, PathBuf};

use aegis_engine::{
    ChatFormat, EncoderInfo, EncoderOutput, EncoderReading, Encoding, ModelInfo, Prompt, Segment,
    SentenceEncoder, Speaker,
};
use aegis_heads::{probe_texts, Encoder, EncoderFingerprint, Features, Head};

use crate::error::GuardError;
use crate::template::{hex_sha256, Validator};

/// Heads live in this folder inside the templates folder.
pub const HEADS_DIR: &str = "heads";

/// The encoder's adaptation (issue "Read who says it"), in [`HEADS_DIR`]: when the file is there
/// the encoder loads with it merged, and the heads beside it are trained on the adapted encoder.
pub const ENCODER_ADAPTER_FILE: &str = "encoder-adapter.safetensors";

/// Where the guard built from `templates_dir` finds its encoder's adapter, when it has one.
pub fn encoder_adapter(templates_dir: &Path) -> Option<PathBuf> {
    Some(heads_dir(templates_dir, true).join(ENCODER_ADAPTER_FILE)).filter(|p| p.is_file())
}

/// Heads reading the model's hidden states live in this folder inside [`HEADS_DIR`], so the
/// shipped heads for both readers sit side by side and `--encoder decoder` keeps working.
pub const DECODER_HEADS_DIR: &str = "decoder";

/// What the model is told before the message when heads encode it, inside a user's turn opened
/// in its chat format (the message follows in the same turn). Fixed: a head is bound to the
/// preamble's hash, and changing it means retraining every head.
pub const ENCODING_INSTRUCTION: &str =
    "A message sent to a chat assistant, to be checked against safety policies:\n\n";

/// The preamble the model reads before the message in its chat `format`.
pub fn encoding_preamble(format: ChatFormat) -> String {
    format!("{}{ENCODING_INSTRUCTION}", format.open(Speaker::User))
}

/// sha256 of the [`encoding_preamble`], as heads record it.
pub fn encoding_context_hash(format: ChatFormat) -> String {
    hex_sha256(encoding_preamble(format).as_bytes())
}

/// The shared encoding's prompt for `message`: the preamble as template text (control tokens
/// parsed), the message as user text (never control tokens).
pub fn encoding_prompt(format: ChatFormat, message: &str) -> Prompt {
    vec![
        Segment::Template(encoding_preamble(format)),
        Segment::User(message.to_string()),
    ]
}

/// The decoder layers every decoder head in `heads` reads, sorted, each once.
pub fn layers_read(heads: &[Option<Head>]) -> Vec<usize> {
    let mut layers: Vec<usize> = heads
        .iter()
        .flatten()
        .filter(|h| h.features.encoder.is_decoder())
        .flat_map(|h| h.features.layers.iter().copied())
        .collect();
    layers.sort_unstable();
    layers.dedup();
    layers
}

/// What the encoder must read for every encoder head in `heads`: the layers they name (sorted,
/// each once), and the embedding where a head names none. Empty when no head reads the encoder.
pub fn encoder_reading(heads: &[Option<Head>]) -> EncoderReading {
    let mut reading = EncoderReading::default();
    for head in heads.iter().flatten() {
        if head.features.encoder.is_decoder() {
            continue;
        }
        if head.pooling.is_some() {
            reading.token_states = true;
        } else if head.features.layers.is_empty() {
            reading.embedding = true;
        }
        reading.layers.extend(&head.features.layers);
        reading.layers.extend(head.reading_layers());
    }
    reading.layers.sort_unstable();
    reading.layers.dedup();
    reading
}

/// sha256 of an encoder's task prompt, as its heads record it.
pub fn encoder_context_hash(encoder: &EncoderInfo) -> String {
    hex_sha256(encoder.prompt.as_bytes())
}

/// What the encoder read of one message, and what it was asked to read.
#[derive(Debug, Clone, Copy)]
pub struct EncoderRead<'a> {
    pub reading: &'a EncoderReading,
    pub output: &'a EncoderOutput,
}

/// What `head` itself reads: its pooling of the encoder's token states where it has one,
/// otherwise as [`head_input`] reads its features.
pub fn own_head_input(
    head: &Head,
    encoding: Option<&Encoding>,
    encoder: Option<EncoderRead<'_>>,
) -> Result<Vec<f32>, String> {
    let Some(pooling) = &head.pooling else {
        return head_input(&head.features, encoding, encoder);
    };
    let read = encoder.ok_or_else(|| "the encoder did not read the message".to_string())?;
    let tokens = read
        .output
        .token_states
        .as_deref()
        .ok_or_else(|| "the encoder did not return the message's token states".to_string())?;
    pooling.pool(tokens)
}

/// A head's input: its layers' means concatenated in the head's order (the decoder's, or the
/// encoder's), or the encoder's embedding.
pub fn head_input(
    features: &Features,
    encoding: Option<&Encoding>,
    encoder: Option<EncoderRead<'_>>,
) -> Result<Vec<f32>, String> {
    if !features.encoder.is_decoder() {
        let read = encoder.ok_or_else(|| "the encoder did not read the message".to_string())?;
        if features.layers.is_empty() {
            return read
                .output
                .embedding
                .clone()
                .ok_or_else(|| "the message was not embedded".to_string());
        }
        let mut input = Vec::new();
        for layer in &features.layers {
            let mean = read
                .reading
                .layers
                .iter()
                .position(|l| l == layer)
                .and_then(|at| read.output.layer_means.get(at))
                .ok_or_else(|| format!("the encoder did not read layer {layer}"))?;
            input.extend_from_slice(mean);
        }
        return Ok(input);
    }
    let encoding = encoding.ok_or_else(|| "the message was not encoded".to_string())?;
    let mut input = Vec::new();
    for &layer in &features.layers {
        input.extend_from_slice(
            encoding
                .layer(layer)
                .ok_or_else(|| format!("the encoding has no layer {layer}"))?,
        );
    }
    Ok(input)
}

/// The folder of the heads that read a sentence encoder (`reads_encoder`) or the model's hidden
/// states.
pub fn heads_dir(templates_dir: &Path, reads_encoder: bool) -> PathBuf {
    let heads = templates_dir.join(HEADS_DIR);
    if reads_encoder {
        heads
    } else {
        heads.join(DECODER_HEADS_DIR)
    }
}

/// Takes out of `head` the readings of layers `encoder` does not return (a server returns only
/// the sentence embedding), saying which: the head itself still reads what it was trained on, so
/// switching one reading off beats refusing the head (its validator would fall back to its
/// prompt) or failing every verdict.
pub fn switch_off_unread_readings(
    head: &mut Head,
    encoder: Option<&EncoderInfo>,
    path: &Path,
) -> Vec<GuardError> {
    let layers = encoder.map_or(0, |e| e.layers);
    let mut off = Vec::new();
    head.readings.retain(|reading| {
        let missing = reading.layers.iter().flatten().find(|&&l| l > layers);
        if let Some(layer) = missing {
            off.push(GuardError::ReadingOff {
                path: path.to_path_buf(),
                reading: reading.name.clone(),
                reason: format!(
                    "it reads layer {layer}, which this encoder does not return (a server \
                     returns only the sentence embedding)"
                ),
            });
        }
        missing.is_none()
    });
    off
}

pub fn head_path(templates_dir: &Path, key: &str, reads_encoder: bool) -> PathBuf {
    heads_dir(templates_dir, reads_encoder).join(format!("{key}.json"))
}

/// Loads the head of each validator that has one. A head that cannot be used (broken file, other
/// model or encoder, other preamble) is left out with a warning saying why; its validator falls
/// back to the prompt's score.
pub fn load_heads(
    templates_dir: &Path,
    validators: &[Validator],
    model: &ModelInfo,
    encoder: Option<&EncoderInfo>,
) -> (Vec<Option<Head>>, Vec<GuardError>) {
    let mut warnings = Vec::new();
    let heads = validators
        .iter()
        .map(|validator| {
            let path = head_path(templates_dir, &validator.key, encoder.is_some());
            if !path.exists() {
                return None;
            }
            let refused = |reason: String| GuardError::HeadRefused {
                path: path.clone(),
                reason,
            };
            let head = match Head::load(&path) {
                Ok(head) => head,
                Err(e) => {
                    warnings.push(refused(e.to_string()));
                    return None;
                }
            };
            match check_binding(&head, validator, model, encoder) {
                Ok(()) => {
                    let mut head = head;
                    warnings.extend(switch_off_unread_readings(&mut head, encoder, &path));
                    Some(head)
                }
                Err(reason) => {
                    warnings.push(refused(reason));
                    None
                }
            }
        })
        .collect();
    (heads, warnings)
}

/// Why no head can run on `model`, if none can: a model server returns no hidden states.
pub fn heads_unavailable(model: &ModelInfo) -> Option<String> {
    (model.layers == 0).then(|| {
        format!(
            "the model is served by {}, which returns no hidden states for learned heads to read",
            model.content_hash
        )
    })
}

/// The encoder's embeddings of the fingerprint probes, for a head to record what it was trained
/// on and a served encoder to be checked against it.
pub fn encoder_fingerprint(
    encoder: &dyn SentenceEncoder,
) -> aegis_engine::Result<EncoderFingerprint> {
    let texts = probe_texts();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let embeddings = encoder
        .embed_batch(&texts)
        .into_iter()
        .collect::<aegis_engine::Result<Vec<_>>>()?;
    Ok(EncoderFingerprint::from_embeddings(embeddings))
}

/// Whether `head` can score `validator` with `model` loaded and `encoder` (if any) chosen for the
/// heads to read: a head runs only on exactly the weights and context it was trained on, and only
/// when its encoder is the one the heads read (one encoding per verdict).
pub fn check_binding(
    head: &Head,
    validator: &Validator,
    model: &ModelInfo,
    encoder: Option<&EncoderInfo>,
) -> Result<(), String> {
    if head.validator != validator.key {
        return Err(format!(
            "it was trained for validator {:?}, not {:?}",
            head.validator, validator.key
        ));
    }
    match (head.features.encoder, encoder) {
        (Encoder::Decoder, Some(encoder)) => Err(format!(
            "it reads the model's hidden states, but the heads read {} here; retrain it with `aegis train --encoder embeddinggemma`, or run without an encoder",
            encoder.id
        )),
        (Encoder::Decoder, None) => check_decoder_binding(head, model),
        (Encoder::EmbeddingGemma, None) => Err(
            "it reads EmbeddingGemma's sentence embedding, but no encoder is loaded; run with `--encoder embeddinggemma` (or AEGIS_ENCODER) after scripts/setup-encoder.sh"
                .into(),
        ),
        (Encoder::EmbeddingGemma, Some(encoder)) => {
            let same_weights = head.model.content_hash == encoder.content_hash
                || encoder.matches_weights.as_deref() == Some(head.model.content_hash.as_str());
            if !same_weights {
                return Err(other_weights(
                    "encoder",
                    head,
                    &encoder.id,
                    &encoder.content_hash,
                    "`aegis train --encoder`",
                ));
            }
            if head.features.context_hash != encoder_context_hash(encoder) {
                return Err(
                    "it was trained after another task prompt; retrain it with `aegis train --encoder`"
                        .into(),
                );
            }
            if let Some(&layer) = head.features.layers.iter().find(|&&l| l > encoder.layers) {
                return Err(format!(
                    "it reads layer {layer}, but the encoder has {} layers",
                    encoder.layers
                ));
            }
            Ok(())
        }
    }
}

fn check_decoder_binding(head: &Head, model: &ModelInfo) -> Result<(), String> {
    if let Some(reason) = heads_unavailable(model) {
        return Err(reason);
    }
    if head.model.content_hash != model.content_hash {
        return Err(other_weights(
            "model",
            head,
            &model.id,
            &model.content_hash,
            "`aegis train` on this model",
        ));
    }
    if head.features.context_hash != encoding_context_hash(model.chat_format) {
        return Err(
            "it was trained on another encoding preamble; retrain it with `aegis train`".into(),
        );
    }
    if let Some(&layer) = head.features.layers.iter().find(|&&l| l > model.layers) {
        return Err(format!(
            "it reads layer {layer}, but the loaded model has {} layers",
            model.layers
        ));
    }
    Ok(())
}

/// Why a head trained on other weights than the loaded `what` (model or encoder) is refused.
fn other_weights(what: &str, head: &Head, id: &str, hash: &str, retrain: &str) -> String {
    format!(
        "it was trained for {what} {} (sha256 {}), but the loaded {what} is {id} (sha256 {}); retrain it with {retrain}",
        head.model.id,
        short(&head.model.content_hash),
        short(hash)
    )
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoder(layers: usize) -> EncoderInfo {
        EncoderInfo {
            id: "embeddinggemma-300m".into(),
            content_hash: String::new(),
            prompt: String::new(),
            dimensions: 768,
            context_length: 2048,
            layers,
            device: "cpu".into(),
            weight_format: String::new(),
            matches_weights: None,
        }
    }

    /// The shipped toxic head's contempt reading reads layer 16: an encoder that returns layers
    /// keeps it and the encoder reads that layer beside the embedding; a server (no layers)
    /// switches the reading off, says so, and keeps the head.
    #[test]
    fn a_reading_of_layers_the_encoder_does_not_return_is_switched_off_and_said() {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../prompt_guard/heads/toxic.json");
        let shipped = Head::load(&path).expect("the shipped toxic head");
        assert_eq!(shipped.reading_layers().collect::<Vec<_>>(), vec![16]);

        let mut head = shipped.clone();
        assert!(switch_off_unread_readings(&mut head, Some(&encoder(24)), &path).is_empty());
        assert_eq!(head.readings, shipped.readings);
        let reading = encoder_reading(&[Some(head)]);
        assert!(reading.embedding);
        assert_eq!(reading.layers, vec![16]);

        let mut head = shipped.clone();
        let off = switch_off_unread_readings(&mut head, Some(&encoder(0)), &path);
        assert!(head.readings.is_empty());
        assert_eq!(head.weights, shipped.weights, "the head itself is kept");
        let said: Vec<String> = off.iter().map(ToString::to_string).collect();
        assert_eq!(said.len(), 1);
        assert!(
            said[0].contains("reading \"contempt\" off") && said[0].contains("layer 16"),
            "{said:?}"
        );
        assert!(encoder_reading(&[Some(head)]).layers.is_empty());
    }
}
