//! Validators from `prompt_guard/`, the verdict for a message, and the rejection message.
//! Knows nothing of SQL or HTTP; the model is any `aegis_engine::LanguageModel`.

mod analysis;
mod compat;
mod context;
mod decide;
mod error;
mod exclamation;
mod features;
mod guard;
mod heads;
mod input;
mod language;
mod mention;
mod prompts_dir;
mod readings;
mod template;
mod training;
mod verdict;

pub use compat::{ChatResponse, Step, TurnVerdict, ValidateResponse};
pub use context::{ContextReading, TurnReport, DEFAULT_CONTEXT_TOKENS};
pub use error::{ErrorKind, GuardError, Result};
pub use exclamation::ExclamationReading;
pub use features::{message_features, message_token_states, FeatureCache, MessageFeatures};
pub use guard::{
    Guard, ModelRef, RejectionMode, ScoreSource, Status, TemplateVersion, ValidatorResult, Verdict,
};
pub use heads::{
    encoder_adapter, encoder_fingerprint, encoder_reading, encoding_prompt, head_path, heads_dir,
    heads_unavailable, layers_read, EncoderRead, ENCODER_ADAPTER_FILE, HEADS_DIR,
};
pub use input::{
    fitting_answer_prompt, EarlierTurns, GuardInput, ReceivedConversation, Role, Turn, TurnsChecked,
};
pub use language::Language;
pub use mention::QuoteReading;
pub use prompts_dir::find_prompts_dir;
pub use readings::{
    find_reading, Combine, Reading, ReadingScore, TurnToRead, EXCLAMATION_ELIDED, IN_CONTEXT,
    QUOTES_ELIDED, TURN_READING,
};
pub use template::{load_validators, AppliesTo, LoadedValidators, Rejection, Validator};
pub use training::{
    train_validator, LabelledMessage, LayerSearch, ScoringQuality, ValidatorTraining,
    TAUGHT_ID_PREFIX,
};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_conversation;
#[cfg(test)]
mod tests_pooling;
