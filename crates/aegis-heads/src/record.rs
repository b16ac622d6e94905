//! What a trained head records of its training: where it came from and how well it held up.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::hidden::HiddenOptions;

/// Cross-validated quality, from out-of-fold calibrated probabilities.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CvMetrics {
    pub rows: usize,
    pub positives: usize,
    /// Absent when a class is missing (AUC undefined).
    pub roc_auc: Option<f64>,
    /// At probability 0.5.
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
}

/// How out-of-fold scores were made: folds that hold out whole sources (what a user's traffic,
/// from sources no head saw, will see) or random stratified folds (rows of one source on both
/// sides of a split: it rewards memorising a source, and reads higher).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Validation {
    BySource,
    /// Heads written before validation by source existed were measured this way.
    #[default]
    RandomFolds,
}

impl Validation {
    pub fn describe(self) -> &'static str {
        match self {
            Self::BySource => "held-out sources",
            Self::RandomFolds => "random folds",
        }
    }
}

/// Where a head came from, so a reviewer can judge it and a maintainer can reproduce it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainingRecord {
    /// sha256 over the training rows used (text and label), independent of file layout.
    pub data_sha256: String,
    pub rows: usize,
    pub positives: usize,
    /// L2 strength chosen by cross-validation.
    pub alpha: f64,
    pub folds: usize,
    /// How `cv` was measured.
    #[serde(default)]
    pub validation: Validation,
    pub cv: CvMetrics,
    /// The same metrics per language (`id`, `en`).
    pub cv_by_language: BTreeMap<String, CvMetrics>,
    /// Random stratified folds at the same strength, beside a by-source `cv`, to show how much a
    /// random split overstates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub random_folds_cv: Option<CvMetrics>,
    /// The threshold tuned with this head on the benign budget (`aegis train --tune-thresholds`).
    /// The template's threshold is tuned for the default heads (on the sentence encoder); a
    /// head on the model's hidden states decides at its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
    /// Trained on out-of-fold embeddings of an adapted encoder (`aegis train --out-of-fold`):
    /// the cross-fit run's settings and data hash. The adapter file does not record its own, so
    /// that they match is the trainer's word, kept here for a reviewer to compare with the
    /// adapter's version record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out_of_fold: Option<String>,
    /// How the head's hidden layer was trained; absent for a linear head. Retraining the head
    /// (the Teach view) trains the same kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden: Option<HiddenOptions>,
    /// Trained with a map per language (`aegis train --by-language`): the head's `languages`
    /// hold them, and retraining it (the Teach view) trains them again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub by_language: bool,
    /// How the features it learned from were computed: the encoder's weight format and the CPU
    /// kernels that ran it (the encoder's weight format, `bf16 layers (amx-bf16 kernels), …`).
    /// Kernel kinds differ in their last bits (AMX tiles and AVX-512 BF16 run the same bf16
    /// products, but their sums come out a rounding apart), and a head retrains bit for bit only on the same kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features_arithmetic: Option<String>,
}
