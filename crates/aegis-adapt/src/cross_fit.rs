//! Adapters trained per held-out fold of sources, so that every text has an embedding from an
//! adapter that never saw its source. A head trained on an adapter's own training rows reads
//! features the adapter has memorised: its held-out-source scores, and the thresholds chosen on
//! them, are then no longer held out (issue "Read who says it", candidate 1). Cross-fitting gives
//! the honest figures: fold k's rows are read by the adapter trained without fold k, and so are
//! texts that are only scored (no labels: no fold trains on them).

use std::path::Path;

use candle_core::Tensor;

use crate::error::{AdaptError, Result};
use crate::top::{AdaptedTop, AdapterShape};
use crate::train::{batches, joined_states, train, TrainingOptions, TrainingReport, TrainingText};
use crate::{exact_top, lower_states, Progress};

/// One sentence embedding per text; `None` where the text is longer than training reads.
pub type Embeddings = Vec<Option<Vec<f32>>>;

/// Every text's embedding through the plain encoder and through each fold's adapter.
#[derive(Debug, Clone)]
pub struct CrossFit {
    /// With the updates at zero: the plain encoder, read the same way, for the baseline.
    pub plain: Embeddings,
    /// `by_fold[k][i]`: text `i` through the adapter trained without fold `k`.
    pub by_fold: Vec<Embeddings>,
    pub reports: Vec<TrainingReport>,
}

/// Trains one adapter per fold on the texts of the other folds (`fold_of[i]`; `None`: a text
/// that is only read, never trained on) and reads every text through each.
#[allow(clippy::too_many_arguments)]
pub fn cross_fit(
    folder: &Path,
    texts: &[TrainingText],
    fold_of: &[Option<usize>],
    folds: usize,
    validators: usize,
    shape: AdapterShape,
    options: &TrainingOptions,
    mut progress: impl FnMut(Progress),
) -> Result<CrossFit> {
    if fold_of.len() != texts.len() || folds < 2 {
        return Err(AdaptError::Invalid(format!(
            "cross-fitting needs a fold for each of the {} texts and at least 2 folds",
            texts.len()
        )));
    }
    let (_, states) = lower_states(folder, texts, shape.first_layer, &mut progress)?;
    let plain = embed(
        &exact_top(folder, &shape, options)?,
        &states,
        options,
        &mut progress,
    )?;
    let mut by_fold = Vec::with_capacity(folds);
    let mut reports = Vec::with_capacity(folds);
    for fold in 0..folds {
        progress(Progress::Fold { fold, folds });
        // The fold's own rows, and the rows only read, teach nothing.
        let training: Vec<TrainingText> = texts
            .iter()
            .zip(fold_of)
            .map(|(text, of)| TrainingText {
                labels: if of.is_some_and(|f| f != fold) {
                    text.labels.clone()
                } else {
                    vec![None; text.labels.len()]
                },
                ..text.clone()
            })
            .collect();
        let top = exact_top(folder, &shape, options)?;
        let report = train(&top, &states, &training, validators, options, |step| {
            progress(Progress::Step(step.clone()))
        })?;
        by_fold.push(embed(&top, &states, options, &mut progress)?);
        reports.push(report);
    }
    Ok(CrossFit {
        plain,
        by_fold,
        reports,
    })
}

/// The sentence embedding of every text that has states, through `top` as it stands.
fn embed(
    top: &AdaptedTop,
    states: &[Option<Tensor>],
    options: &TrainingOptions,
    progress: &mut impl FnMut(Progress),
) -> Result<Embeddings> {
    let readable: Vec<usize> = (0..states.len()).filter(|&i| states[i].is_some()).collect();
    let mut out = vec![None; states.len()];
    let mut done = 0;
    for batch in batches(&readable, states, options.batch_tokens) {
        let (input, lengths) = joined_states(&batch, states)?;
        // Only the values are kept: the graph the forward pass records goes with the tensor.
        let rows: Vec<Vec<f32>> = top.forward(&input, &lengths)?.detach().to_vec2()?;
        for (&i, row) in batch.iter().zip(rows) {
            out[i] = Some(row);
        }
        done += batch.len();
        progress(Progress::Embedded {
            done,
            total: readable.len(),
        });
    }
    Ok(out)
}
