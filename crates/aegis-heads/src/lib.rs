//! Learned heads: a small linear model per validator on the guard model's hidden states.
//!
//! The default model answers policy questions at chance when prompted, but its hidden states
//! separate the classes well; a head turns them into a calibrated probability. This crate holds
//! the head artefact, its training (standardise, class-balance, L2 logistic regression with the
//! regularisation chosen by cross-validation, Platt calibration) and the metrics that report it.
//! It knows nothing of models or templates: features are plain vectors.

mod adam;
mod attention;
mod error;
mod example;
mod fingerprint;
mod fold_fits;
mod folds;
mod head;
mod hidden;
mod metrics;
mod reading;
mod record;
mod residual;
mod solver;
mod train;
mod weights;

pub use attention::{
    train_with_attention, AttendedTraining, AttentionPooling, QueryChoice, QueryOptions,
};
pub use error::{HeadError, Result};
pub use example::Example;
pub use fingerprint::{probe_texts, EncoderFingerprint, Probe, ProbeEmbedding};
pub use folds::source_folds;
pub use head::{
    candidate_label, Encoder, Features, Head, LanguageMap, LanguageRule, LayersInput, ModelBinding,
    HEAD_FORMAT,
};
pub use hidden::{HiddenLayer, HiddenOptions};
pub use metrics::{cv_metrics, metrics_by_language, roc_auc, BinaryMetrics};
pub use reading::Reading;
pub use record::{CvMetrics, TrainingRecord, Validation};
pub use train::{train, FoldReport, TrainOptions, Trained};
