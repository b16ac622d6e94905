//! Rows dealt into cross-validation folds and fitted there: each fold's training side
//! standardised once, the linear map fitted at each strength tried and the hidden layer from it,
//! in parallel across folds; and the standardised rows of the final fit.

use ndarray::{Array1, Array2, Axis};

use crate::error::{HeadError, Result};
use crate::hidden::HiddenOptions;
use crate::residual::{fit_residual, ResidualModel, ResidualRows};
use crate::solver::{fit_logistic, Design};
use crate::weights::row_weights;

/// Standardisation plus a linear decision function on the standardised features.
pub(crate) struct LinearModel {
    pub(crate) mean: Array1<f64>,
    pub(crate) scale: Array1<f64>,
    pub(crate) weights: Array1<f64>,
    pub(crate) intercept: f64,
}

impl LinearModel {
    pub(crate) fn decision(&self, x: &Array2<f64>) -> Array1<f64> {
        ((x - &self.mean) / &self.scale).dot(&self.weights) + self.intercept
    }
}

/// A fold's fitted weights and intercept, in its own standardised space.
pub(crate) type FoldFit = (Array1<f64>, f64);

/// Rows dealt into folds, each fold's training side standardised once for every strength tried
/// (copying and standardising the matrix per fit cost as much as the fit).
pub(crate) struct FoldSplit {
    rows: usize,
    folds: Vec<Fold>,
}

struct Fold {
    held_out: Vec<usize>,
    /// The held-out rows as each view reads them (one view but for
    /// [`LanguageRule::Highest`](crate::LanguageRule::Highest)): a row's decision is the highest.
    held_out_views: Vec<Array2<f64>>,
    train: Standardised,
}

impl FoldSplit {
    /// `x` is what the fits train on; `views` (each `x`'s shape) are how a held-out row is
    /// scored, its decision the highest of theirs; none means `x` itself.
    pub(crate) fn new(
        x: &Array2<f64>,
        views: &[Array2<f64>],
        labels: &[bool],
        taught: &[bool],
        fold_of: &[usize],
        folds: usize,
        scales: ColumnScales,
    ) -> Result<Self> {
        let folds = (0..folds)
            .map(|fold| {
                let (train, held_out): (Vec<usize>, Vec<usize>) =
                    (0..labels.len()).partition(|&i| fold_of[i] != fold);
                let train_labels: Vec<bool> = train.iter().map(|&i| labels[i]).collect();
                let train_taught: Vec<bool> = train.iter().map(|&i| taught[i]).collect();
                let train = Standardised::new(
                    &x.select(Axis(0), &train),
                    &train_labels,
                    &train_taught,
                    scales,
                )?;
                let held_out_views = if views.is_empty() {
                    vec![x.select(Axis(0), &held_out)]
                } else {
                    views.iter().map(|v| v.select(Axis(0), &held_out)).collect()
                };
                Ok(Fold {
                    held_out_views,
                    held_out,
                    train,
                })
            })
            .collect::<Result<_>>()?;
        Ok(Self {
            rows: labels.len(),
            folds,
        })
    }

    /// Held-out decision values for every row at one strength, and each fold's fit (to
    /// warm-start the next strength, which is close: a regularisation path). The folds are fitted
    /// in parallel; each fit is deterministic, so the result does not depend on the thread count.
    pub(crate) fn out_of_fold_decisions(
        &self,
        alpha: f64,
        starts: &[Option<FoldFit>],
    ) -> Result<(Array1<f64>, Vec<FoldFit>)> {
        let fitted = self.each_fold(|fold, index| {
            let start = starts.get(index).and_then(|s| s.as_ref());
            let model = fold.train.fit(alpha, start)?;
            let highest = fold
                .held_out_views
                .iter()
                .map(|view| model.decision(view))
                .reduce(|a, b| ndarray::Zip::from(&a).and(&b).map_collect(|x, y| x.max(*y)))
                .unwrap_or_default();
            Ok((highest, model))
        });
        let mut decisions = Array1::zeros(self.rows);
        let mut models = Vec::with_capacity(self.folds.len());
        for (fold, result) in self.folds.iter().zip(fitted) {
            let (held_out, model) = result?;
            for (&i, d) in fold.held_out.iter().zip(held_out) {
                decisions[i] = d;
            }
            models.push((model.weights, model.intercept));
        }
        Ok((decisions, models))
    }

    /// Held-out decision values for every row of a head with a hidden layer, each fold's layer
    /// trained from its linear fit `fits[fold]`.
    pub(crate) fn out_of_fold_residual(
        &self,
        alpha: f64,
        fits: &[FoldFit],
        options: &HiddenOptions,
    ) -> Result<Array1<f64>> {
        let fitted = self.each_fold(|fold, index| {
            let (weights, intercept) = &fits[index];
            let model = fold
                .train
                .fit_residual(alpha, (weights, *intercept), options)?;
            let mut highest = vec![f64::NEG_INFINITY; fold.held_out.len()];
            for view in &fold.held_out_views {
                let held_out = fold.train.standardise(view);
                for (best, row) in highest
                    .iter_mut()
                    .zip(held_out.chunks_exact(view.ncols().max(1)))
                {
                    *best = best.max(model.decision(row));
                }
            }
            Ok(highest)
        });
        let mut decisions = Array1::zeros(self.rows);
        for (fold, result) in self.folds.iter().zip(fitted) {
            for (&i, d) in fold.held_out.iter().zip(result?) {
                decisions[i] = d;
            }
        }
        Ok(decisions)
    }

    /// `fit(fold, index)` for every fold, in parallel, results in fold order. Each fit is
    /// deterministic, so the results do not depend on the thread count.
    fn each_fold<T: Send>(&self, fit: impl Fn(&Fold, usize) -> Result<T> + Sync) -> Vec<Result<T>> {
        let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
        let indices: Vec<usize> = (0..self.folds.len()).collect();
        let mut fitted: Vec<Option<Result<T>>> = (0..self.folds.len()).map(|_| None).collect();
        let fit = &fit;
        for batch in indices.chunks(workers.max(1)) {
            std::thread::scope(|scope| {
                let handles: Vec<_> = batch
                    .iter()
                    .map(|&index| (index, scope.spawn(move || fit(&self.folds[index], index))))
                    .collect();
                for (index, handle) in handles {
                    fitted[index] =
                        Some(handle.join().unwrap_or_else(|_| {
                            Err(HeadError::Fit("a fold's fit panicked".into()))
                        }));
                }
            });
        }
        fitted.into_iter().flatten().collect()
    }
}

/// What each column is divided by before the L2 sees its weight.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum ColumnScales {
    /// Its own spread: every feature equally dear.
    Own,
    /// The columns past the first `width` copy the first block's features on some rows (a
    /// language's correction, `crate::train`): each is divided by its shared column's spread
    /// times `√cost`, so a weight there is `cost` times as dear as the same weight on the shared
    /// column. By their own spread, a copy present on half the rows would be the cheaper column,
    /// and the corrections would carry as much as the shared map.
    Corrections { width: usize, cost: f64 },
}

/// Rows standardised on their own mean and spread, with the weights the fit gives them
/// ([`row_weights`]).
pub(crate) struct Standardised {
    mean: Array1<f64>,
    scale: Array1<f64>,
    design: Design,
    labels: Vec<bool>,
    row_weights: Vec<f64>,
}

impl Standardised {
    pub(crate) fn new(
        x: &Array2<f64>,
        labels: &[bool],
        taught: &[bool],
        scales: ColumnScales,
    ) -> Result<Self> {
        let mean = x
            .mean_axis(Axis(0))
            .ok_or_else(|| HeadError::Fit("no rows".into()))?;
        let scale = x
            .std_axis(Axis(0), 0.0)
            .mapv(|s| if s > 1e-12 { s } else { 1.0 });
        let scale = match scales {
            ColumnScales::Own => scale,
            ColumnScales::Corrections { width, cost } => {
                let dearer = cost.sqrt();
                Array1::from_iter((0..scale.len()).map(|j| {
                    if j < width {
                        scale[j]
                    } else {
                        scale[j % width] * dearer
                    }
                }))
            }
        };
        let design = Design::new((x - &mean) / &scale);
        Ok(Self {
            mean,
            scale,
            design,
            labels: labels.to_vec(),
            row_weights: row_weights(labels, taught),
        })
    }

    /// The hidden layer beside the linear map `start` (fitted at `alpha` on these rows).
    pub(crate) fn fit_residual(
        &self,
        alpha: f64,
        start: (&Array1<f64>, f64),
        options: &HiddenOptions,
    ) -> Result<ResidualModel> {
        let weights = start
            .0
            .as_slice()
            .ok_or_else(|| HeadError::Fit("weights".into()))?;
        fit_residual(
            &ResidualRows {
                x: self.design.x32(),
                width: self.mean.len(),
                labels: &self.labels,
                row_weights: &self.row_weights,
            },
            alpha,
            (weights, start.1),
            options,
        )
    }

    /// Other rows in this standardised space, single precision, row-major.
    fn standardise(&self, x: &Array2<f64>) -> Vec<f32> {
        ((x - &self.mean) / &self.scale)
            .iter()
            .map(|&v| v as f32)
            .collect()
    }

    /// The L2 logistic regression at strength `alpha`.
    pub(crate) fn fit(&self, alpha: f64, start: Option<&FoldFit>) -> Result<LinearModel> {
        let (weights, intercept) = fit_logistic(
            &self.design,
            &self.labels,
            &self.row_weights,
            alpha,
            start.map(|(w, b)| (w, *b)),
        )?;
        Ok(LinearModel {
            mean: self.mean.clone(),
            scale: self.scale.clone(),
            weights,
            intercept,
        })
    }
}
