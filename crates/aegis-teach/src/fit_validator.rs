//! The one fit: a validator's head, its strength and its threshold, from labelled rows and their
//! features. `aegis train` (many validators over one read of the features) and the Teach view
//! (one validator, with flips and the author's figures around it) both call [`fit_validator`],
//! so the threshold rule, its rounding and the warning cannot drift apart.

use std::path::PathBuf;

use aegis_eval::BudgetChoice;
use aegis_guard::{
    train_validator, Guard, LabelledMessage, LayerSearch, MessageFeatures, ValidatorTraining,
};
use aegis_heads::TrainOptions;

use crate::error::Result;

/// Where features are cached unless `AEGIS_FEATURE_CACHE` says otherwise: shared by `aegis
/// train`, `aegis examples suggest` and the Teach view, so a text one encoded is free to the
/// others.
pub fn feature_cache_dir() -> PathBuf {
    std::env::var_os("AEGIS_FEATURE_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            dirs::cache_dir()
                .unwrap_or_else(std::env::temp_dir)
                .join("aegis/features")
        })
}

/// A fitted validator and the line it decides at.
#[derive(Debug, Clone)]
pub struct FittedValidator {
    /// The head (its `training.threshold` set to `threshold`), the chosen layers and strength,
    /// and the out-of-fold scores everything below was measured on.
    pub trained: ValidatorTraining,
    /// What the benign budget chose, when one was asked for and the data has benign rows.
    pub budget: Option<BudgetChoice>,
    /// The line the author's examples draw ([`crate::near_miss_threshold`]: where
    /// [`crate::AUTHOR_RECALL_FLOOR`] of their violating examples still fail out of fold), when a
    /// budget was asked for and enough near misses are taught.
    pub near_miss: Option<f64>,
    /// The higher of the two, to three decimals as templates write it; `None` when no budget was
    /// asked for.
    pub threshold: Option<f64>,
    /// Why the head may have learned the topic rather than the policy.
    pub topic_warning: Option<String>,
    /// What each place of the line would catch and flag on the author's examples, out of fold.
    pub trade_off: Vec<crate::LinePoint>,
}

impl FittedValidator {
    /// Whether the author's examples, not the benign budget, set the threshold.
    pub fn raised_by_examples(&self) -> bool {
        match (self.near_miss, &self.budget) {
            (Some(line), Some(budget)) => line > budget.threshold,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }
}

/// Fits `key`'s head on `messages` (the rows labelled for it among them) and their `features`,
/// searching `search`'s layers with `options`; with a `benign_budget`, chooses the threshold that
/// flags at most that share of the benign rows (nested in the same folds), raised to the line the
/// author's near misses draw. Without one the template's threshold stays.
pub fn fit_validator(
    guard: &Guard,
    key: &str,
    messages: &[LabelledMessage],
    features: &[MessageFeatures],
    search: &LayerSearch,
    options: &TrainOptions,
    benign_budget: Option<f64>,
) -> Result<FittedValidator> {
    let mut trained = train_validator(guard, key, messages, features, search, options)?;
    let budget = benign_budget.and_then(|budget| {
        aegis_eval::choose_threshold_for_budget(
            &trained.chosen.out_of_fold,
            &trained.labels,
            &trained.benign,
            budget,
            &trained.chosen.fold_of,
            3,
        )
    });
    let out_of_fold = &trained.chosen.out_of_fold;
    let near_miss = benign_budget
        .and_then(|_| crate::near_miss::near_miss_threshold(key, messages, out_of_fold));
    let threshold =
        crate::near_miss::higher_threshold(budget.as_ref().map(|c| c.threshold), near_miss)
            .map(|t| (t * 1000.0).round() / 1000.0);
    trained.head.training.threshold = threshold;
    let topic_warning = crate::topic_warning(
        &trained.chosen.out_of_fold,
        &trained.labels,
        threshold,
        crate::near_miss::taught_near_misses(key, messages),
    );
    let trade_off =
        crate::trade_off::trade_off(key, messages, &trained.chosen.out_of_fold, &trained.benign);
    Ok(FittedValidator {
        trained,
        budget,
        near_miss,
        threshold,
        topic_warning,
        trade_off,
    })
}
