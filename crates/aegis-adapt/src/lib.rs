//! Trains an adaptation of EmbeddingGemma's upper layers (issue "Read who says it"): a report of
//! abuse and the abuse share their words, and only the attention layers can tell a quoted insult
//! from one that is said, so the learning moves from the linear heads into the encoder.
//!
//! The lower layers run once per text on the fast path and their output is cached
//! ([`states`]); the upper layers run in f32 with candle's autograd, a low-rank update beside each
//! projection ([`top`]), and every validator's steering head is trained with them ([`train`]).
//! The result is an [`aegis_engine::EncoderAdapter`] the engine merges into the weights at load.

mod cross_fit;
mod error;
mod out_of_fold;
mod states;
mod top;
mod train;

use std::path::Path;

use aegis_engine::{
    DeviceChoice, EmbeddingGemma, EncoderAdapter, EncoderArithmetic, SentenceEncoder,
};

pub use cross_fit::{cross_fit, CrossFit, Embeddings};
pub use error::{AdaptError, Result};
pub use out_of_fold::OutOfFold;
pub use states::{cache_folder, TokenStates};
use states::{cache_path, read_states};
pub use top::{AdaptedTop, AdapterShape, Products};
pub use train::{
    train, SteeringHeads, StepProgress, TrainingOptions, TrainingReport, TrainingText,
};

/// The longest text training reads, in tokens: within the sliding window's reach (a sliding layer
/// sees 256 positions either side of a query), so no layer needs a mask.
pub const MAX_TRAINING_TOKENS: usize = 257;

/// What a run reports as it goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// Lower-layer states read for `done` of `total` texts.
    States {
        done: usize,
        total: usize,
    },
    Step(StepProgress),
    /// Cross-fitting: the adapter that holds out `fold` (of `folds`) starts training.
    Fold {
        fold: usize,
        folds: usize,
    },
    /// Sentence embeddings read through an adapter for `done` of `total` texts.
    Embedded {
        done: usize,
        total: usize,
    },
}

/// Trains an adapter of the encoder in `folder` on `texts` (labels for `validators` validators).
pub fn adapt(
    folder: &Path,
    texts: &[TrainingText],
    validators: usize,
    shape: AdapterShape,
    options: &TrainingOptions,
    mut progress: impl FnMut(Progress),
) -> Result<(EncoderAdapter, TrainingReport)> {
    let (base_hash, states) = lower_states(folder, texts, shape.first_layer, &mut progress)?;
    let top = exact_top(folder, &shape, options)?;
    let report = train(&top, &states, texts, validators, options, |step| {
        progress(Progress::Step(step.clone()))
    })?;
    Ok((top.to_adapter(base_hash)?, report))
}

/// The encoder's content hash and every text's states below layer `first_layer`, read once on
/// the precise fast path (bf16, never int8; cached) so that training and embedding run only the
/// adapted layers.
fn lower_states(
    folder: &Path,
    texts: &[TrainingText],
    first_layer: usize,
    progress: &mut impl FnMut(Progress),
) -> Result<(String, Vec<Option<candle_core::Tensor>>)> {
    let fast = EmbeddingGemma::load_with(folder, DeviceChoice::Cpu, EncoderArithmetic::Precise)?;
    let base_hash = fast.info().content_hash.clone();
    let strings: Vec<&str> = texts.iter().map(|t| t.text.as_str()).collect();
    let cache = cache_path(&base_hash, first_layer, &strings);
    let states = read_states(
        &fast,
        &strings,
        first_layer,
        MAX_TRAINING_TOKENS,
        cache.as_deref(),
        |done, total| progress(Progress::States { done, total }),
    )?;
    Ok((base_hash, states.states))
}

/// A trainable top with its updates at their start: the upper layers' weights come from the
/// encoder's exact (f32) load.
fn exact_top(folder: &Path, shape: &AdapterShape, options: &TrainingOptions) -> Result<AdaptedTop> {
    let exact = EmbeddingGemma::load_with(folder, DeviceChoice::Cpu, EncoderArithmetic::Exact)?;
    AdaptedTop::new(
        &exact,
        shape.clone(),
        Products::Fast,
        MAX_TRAINING_TOKENS,
        options.seed,
    )
}
