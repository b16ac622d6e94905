//! Which learned head, if any, scores each validator: `prompt_guard/heads/<key>.json`, used only
//! with the exact model and template text it was trained on.

use std::path::{Path, PathBuf};

use aegis_engine::ModelInfo;
use aegis_heads::{FeatureKind, Head};

use crate::error::GuardError;
use crate::template::Validator;

/// Heads live in this folder inside the templates folder.
pub const HEADS_DIR: &str = "heads";

pub fn head_path(templates_dir: &Path, key: &str) -> PathBuf {
    templates_dir.join(HEADS_DIR).join(format!("{key}.json"))
}

/// The template hash a head of `kind` for `validator` must carry. The message mean is read from
/// the first validator's prompt (the one the shared prefix is computed from), so it is that
/// prompt's opening that matters.
pub fn feature_template_hash(
    kind: FeatureKind,
    validator: &Validator,
    validators: &[Validator],
) -> String {
    match kind {
        FeatureKind::MessageMean => validators.first().unwrap_or(validator).prefix_hash(),
        FeatureKind::AnswerHidden => validator.body_hash(),
    }
}

/// Loads the head of each validator that has one. A head that cannot be used (broken file, other
/// model, changed template) is left out with a warning saying why; its validator falls back to
/// the prompt's score.
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
            match check_binding(&head, validator, validators, model) {
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

pub fn check_binding(
    head: &Head,
    validator: &Validator,
    validators: &[Validator],
    model: &ModelInfo,
) -> Result<(), String> {
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
    if head.template_hash != feature_template_hash(head.feature, validator, validators) {
        let which = match head.feature {
            FeatureKind::MessageMean => "the prompt text before {{message}}",
            FeatureKind::AnswerHidden => "the prompt text",
        };
        return Err(format!(
            "{which} changed since it was trained; retrain it with `aegis train`"
        ));
    }
    Ok(())
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}
