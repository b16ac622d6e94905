//! Teaching a validator: its training rows (the labelled files beside the heads, the examples
//! taught in history), a head fitted and measured on cached features, the verdicts the new head
//! would change, and applying it as a version that reverts bit for bit. The console's Teach view
//! and `aegis train` / `aegis heads` share it.

mod adapter;
mod applied;
mod author_figures;
mod data;
mod error;
mod fit;
mod fit_validator;
mod near_miss;
mod suggest;
#[cfg(test)]
mod test_rows;
mod trade_off;
mod versions;

pub use adapter::{adapter_path, apply_adapter, AdapterRecord};
pub use applied::Applied;
pub use author_figures::{author_figures, AuthorFigures, LanguageFigures};
pub use data::{
    keep_positives, negatives_for_new_validator, read_messages, taught_rows, training_files,
    TrainingFiles,
};
pub use error::{Result, TeachError};
pub use near_miss::{topic_warning, NEAR_MISS_BUDGET};
pub use suggest::{
    suggest, suggestion_pool, SuggestRequest, Suggestion, SuggestionPool, SuggestionReason,
};
pub use trade_off::{trade_off, LinePoint, AUTHOR_RECALL_FLOOR};

/// Share of benign rows a trained head's threshold may flag: the shipped heads' budget (four
/// validators within 4% of benign traffic together; README, "Benign budget"), and the default for
/// heads a team trains, in the Teach view or with `aegis train --tune-thresholds`.
pub const BENIGN_BUDGET: f64 = 0.01;
pub use fit::{fit_head, read_features, FitRequest, HeadFlip, Progress, TaughtHead, TeachFigures};
pub use fit_validator::{feature_cache_dir, fit_validator, FittedValidator};
pub use versions::{
    apply_head, finish_interrupted_applies, interrupted_applies, revert_head, FAULT_POINT_EXIT,
};
