//! The guard: every validator's question about one message, a verdict, and a rejection message.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use aegis_engine::{EngineError, LanguageModel, Segment};
use serde::Serialize;

use crate::error::{GuardError, Result};
use crate::language::Language;
use crate::template::{load_validators, LoadedValidators, Validator};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Passed,
    Failed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Passed => "passed",
            Self::Failed => "failed",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ValidatorResult {
    pub key: String,
    pub name: String,
    /// P(violation), in (0, 1).
    pub score: f32,
    pub threshold: f32,
    /// The score is below the threshold.
    pub passed: bool,
    pub latency_ms: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TemplateVersion {
    pub key: String,
    pub content_hash: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelRef {
    pub id: String,
    pub content_hash: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub status: Status,
    /// "aman" when every validator passed, else the failed keys joined by ", " (original API).
    pub case: String,
    pub results: Vec<ValidatorResult>,
    /// Empty when passed.
    pub rejection_message: String,
    pub language: Language,
    pub model: ModelRef,
    pub templates: Vec<TemplateVersion>,
    pub latency_ms: f64,
}

/// How the rejection message is written when something failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RejectionMode {
    /// The failed validators' messages from their front matter.
    #[default]
    Templated,
    /// Written by the model, at most this many tokens; falls back to the templated message.
    Generated { max_tokens: usize },
}

pub struct Guard {
    model: Arc<dyn LanguageModel>,
    validators: Vec<Validator>,
    rejection: RejectionMode,
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard")
            .field("model", &self.model.info().id)
            .field("validators", &self.validators.len())
            .finish()
    }
}

impl Guard {
    pub fn new(model: Arc<dyn LanguageModel>, validators: Vec<Validator>) -> Self {
        Self {
            model,
            validators,
            rejection: RejectionMode::default(),
        }
    }

    /// Loads the templates in `dir`. Broken templates are returned beside the guard, not fatal,
    /// unless none is usable.
    pub fn from_dir(model: Arc<dyn LanguageModel>, dir: &Path) -> Result<(Self, Vec<GuardError>)> {
        let LoadedValidators { validators, errors } = load_validators(dir)?;
        if validators.is_empty() {
            return Err(GuardError::NoValidators(dir.to_path_buf()));
        }
        Ok((Self::new(model, validators), errors))
    }

    pub fn with_rejection(mut self, mode: RejectionMode) -> Self {
        self.rejection = mode;
        self
    }

    pub fn validators(&self) -> &[Validator] {
        &self.validators
    }

    pub fn model(&self) -> &Arc<dyn LanguageModel> {
        &self.model
    }

    pub fn check(&self, text: &str) -> Result<Verdict> {
        let started = Instant::now();
        if text.trim().is_empty() {
            return Err(GuardError::EmptyText);
        }
        let prompts: Vec<Vec<Segment>> = self.validators.iter().map(|v| v.prompt(text)).collect();
        let scores = self
            .model
            .score(&prompts)
            .map_err(|e| self.explain_engine_error(e, text))?;
        let results: Vec<ValidatorResult> = self
            .validators
            .iter()
            .zip(&scores)
            .map(|(v, s)| ValidatorResult {
                key: v.key.clone(),
                name: v.name.clone(),
                score: s.p_yes,
                threshold: v.threshold,
                passed: s.p_yes < v.threshold,
                latency_ms: s.elapsed_ms,
            })
            .collect();
        let failed: Vec<&Validator> = self
            .validators
            .iter()
            .zip(&results)
            .filter(|(_, r)| !r.passed)
            .map(|(v, _)| v)
            .collect();
        let language = Language::detect(text);
        let (status, case, rejection_message) = if failed.is_empty() {
            (Status::Passed, "aman".to_string(), String::new())
        } else {
            let case = failed
                .iter()
                .map(|v| v.key.as_str())
                .collect::<Vec<_>>()
                .join(", ");
            (
                Status::Failed,
                case,
                self.rejection_message(&failed, language),
            )
        };
        let info = self.model.info();
        Ok(Verdict {
            status,
            case,
            results,
            rejection_message,
            language,
            model: ModelRef {
                id: info.id.clone(),
                content_hash: info.content_hash.clone(),
            },
            templates: self
                .validators
                .iter()
                .map(|v| TemplateVersion {
                    key: v.key.clone(),
                    content_hash: v.content_hash.clone(),
                })
                .collect(),
            latency_ms: started.elapsed().as_secs_f64() * 1e3,
        })
    }

    /// Turns the engine's "prompt too long" into one about the message, with both lengths.
    fn explain_engine_error(&self, error: EngineError, text: &str) -> GuardError {
        match error {
            EngineError::ContextExceeded {
                prompt_tokens,
                limit,
            } => GuardError::TooLong {
                message_tokens: self.model.count_user_tokens(text).unwrap_or(0),
                prompt_tokens,
                limit,
            },
            other => GuardError::Engine(other),
        }
    }

    fn templated_rejection(failed: &[&Validator], language: Language) -> String {
        failed
            .iter()
            .map(|v| v.rejection.for_language(language).trim())
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn rejection_message(&self, failed: &[&Validator], language: Language) -> String {
        let templated = Self::templated_rejection(failed, language);
        let RejectionMode::Generated { max_tokens } = self.rejection else {
            return templated;
        };
        // The user's text is deliberately left out: the message only names the policies, so a
        // crafted message cannot steer what the guard says back.
        let policies = failed
            .iter()
            .map(|v| v.name.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let language_name = match language {
            Language::Indonesian => "Indonesian",
            Language::English => "English",
        };
        let prompt = vec![Segment::Template(format!(
            "<start_of_turn>user\nWrite one short, polite sentence in {language_name} telling a user that you cannot help with their message because it goes against these policies: {policies}. Reply with the sentence only.<end_of_turn>\n<start_of_turn>model\n"
        ))];
        match self.model.generate(&prompt, max_tokens, &mut |_| {}) {
            Ok(text) if !text.trim().is_empty() => text.trim().to_string(),
            Ok(_) => templated,
            Err(e) => {
                tracing::warn!(error = %e, "generating the rejection failed; using the templated message");
                templated
            }
        }
    }
}
