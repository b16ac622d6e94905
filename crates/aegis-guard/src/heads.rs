//! Which learned head, if any, decides each validator: `prompt_guard/heads/<key>.json`, used only
//! with the exact model it was trained on and the shared encoding's preamble.
//!
//! Heads read one encoding of the message shared by every validator (a fixed preamble, then the
//! message), never a validator's own prompt: the message is read once per verdict however many
//! validators there are, and editing a policy's wording leaves its head bound.

use std::path::{Path, PathBuf};

use aegis_engine::{Encoding, ModelInfo, Prompt, Segment};
use aegis_heads::{Features, Head};

use crate::error::GuardError;
use crate::template::{hex_sha256, Validator};

/// Heads live in this folder inside the templates folder.
pub const HEADS_DIR: &str = "heads";

/// What the model reads before the message when heads encode it. Fixed: a head is bound to its
/// hash, and changing it means retraining every head.
pub const ENCODING_PREAMBLE: &str =
    "<start_of_turn>user\nA message sent to a chat assistant, to be checked against safety policies:\n\n";

/// sha256 of [`ENCODING_PREAMBLE`], as heads record it.
pub fn encoding_context_hash() -> String {
    hex_sha256(ENCODING_PREAMBLE.as_bytes())
}

/// The shared encoding's prompt for `message`: the preamble as template text (control tokens
/// parsed), the message as user text (never control tokens).
pub fn encoding_prompt(message: &str) -> Prompt {
    vec![
        Segment::Template(ENCODING_PREAMBLE.to_string()),
        Segment::User(message.to_string()),
    ]
}

/// The layers every head in `heads` reads, sorted, each once.
pub fn layers_read(heads: &[Option<Head>]) -> Vec<usize> {
    let mut layers: Vec<usize> = heads
        .iter()
        .flatten()
        .flat_map(|h| h.features.layers.iter().copied())
        .collect();
    layers.sort_unstable();
    layers.dedup();
    layers
}

/// A head's input from an encoding: its layers' means, concatenated in the head's order.
pub fn head_input(features: &Features, encoding: &Encoding) -> Result<Vec<f32>, String> {
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

pub fn head_path(templates_dir: &Path, key: &str) -> PathBuf {
    templates_dir.join(HEADS_DIR).join(format!("{key}.json"))
}

/// Loads the head of each validator that has one. A head that cannot be used (broken file, other
/// model, other preamble) is left out with a warning saying why; its validator falls back to the
/// prompt's score.
pub fn load_heads(
    templates_dir: &Path,
    validators: &[Validator],
    model: &ModelInfo,
) -> (Vec<Option<Head>>, Vec<GuardError>) {
    let mut warnings = Vec::new();
    let heads = validators
        .iter()
        .map(|validator| {
            let path = head_path(templates_dir, &validator.key);
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
            match check_binding(&head, validator, model) {
                Ok(()) => Some(head),
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

pub fn check_binding(head: &Head, validator: &Validator, model: &ModelInfo) -> Result<(), String> {
    if let Some(reason) = heads_unavailable(model) {
        return Err(reason);
    }
    if head.validator != validator.key {
        return Err(format!(
            "it was trained for validator {:?}, not {:?}",
            head.validator, validator.key
        ));
    }
    if head.model.content_hash != model.content_hash {
        return Err(format!(
            "it was trained for model {} (sha256 {}), but the loaded model is {} (sha256 {}); retrain it with `aegis train` on this model",
            head.model.id,
            short(&head.model.content_hash),
            model.id,
            short(&model.content_hash)
        ));
    }
    if head.features.context_hash != encoding_context_hash() {
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

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}
