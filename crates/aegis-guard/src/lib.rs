//! Validators from `prompt_guard/`, the verdict for a message, and the rejection message.
//! Knows nothing of SQL or HTTP; the model is any `aegis_engine::LanguageModel`.

mod compat;
mod error;
mod guard;
mod language;
mod template;

pub use compat::{ChatResponse, Step, ValidateResponse};
pub use error::{GuardError, Result};
pub use guard::{
    Guard, ModelRef, RejectionMode, Status, TemplateVersion, ValidatorResult, Verdict,
};
pub use language::Language;
pub use template::{load_validators, LoadedValidators, Rejection, Validator, PLACEHOLDER};

#[cfg(test)]
mod tests;
