//! Training a query: Adam on minibatches, the query and the linear map together, from the
//! linear map fitted on the mean and the query at zero (so it starts at the mean's head); then
//! kept only where held-out folds say it reads better than the mean.
//!
//! Deterministic on every CPU as the hidden layer's fit is: an integer generator orders the rows,
//! plain loops in a fixed order, no platform maths but `exp`.

use ndarray::{Array1, Array2};

use super::{AttentionPooling, Pooled, QueryChoice, QueryOptions};
use crate::adam::{Adam, SplitMix};
use crate::error::{HeadError, Result};
use crate::example::Example;
use crate::fold_fits::{ColumnScales, LinearModel, Standardised};
use crate::head::sigmoid;
use crate::metrics::roc_auc;
use crate::train::{assign_folds, train, TrainOptions, Trained};
use crate::weights::row_weights;

/// What [`train_with_attention`] found: how the query did on held-out folds, and the pooling
/// and the head trained on its input where it read better than the mean.
#[derive(Debug, Clone)]
pub struct AttendedTraining {
    pub choice: QueryChoice,
    pub chosen: Option<(AttentionPooling, Trained)>,
}

/// Trains a query over each row's token states (`tokens[i]`: row `i`'s states after the dense
/// layers, row-major at `width`), then the head on what it pools, as [`train`] trains one.
/// `examples[i]`'s features are replaced by that pooling, so the head is trained on exactly the
/// input it will read. The query is kept only if, with each fold's query fitted without that
/// fold, the held-out ROC AUC beats a linear head's on the mean; otherwise `chosen` is `None`.
pub fn train_with_attention(
    examples: &[Example],
    tokens: &[&[f32]],
    width: usize,
    options: &TrainOptions,
    query_options: &QueryOptions,
) -> Result<AttendedTraining> {
    if examples.len() != tokens.len()
        || width == 0
        || tokens.iter().any(|t| {
            t.is_empty() || !t.len().is_multiple_of(width) || t.iter().any(|v| !v.is_finite())
        })
    {
        return Err(HeadError::BadFeatures);
    }
    if query_options.batch_rows == 0 {
        return Err(HeadError::Fit(
            "a query's batches need at least one row".into(),
        ));
    }
    let zero = vec![0.0f32; width];
    let pooled_with = |query: &[f32]| -> Vec<Example> {
        examples
            .iter()
            .zip(tokens)
            .map(|(example, states)| Example {
                features: Pooled::new(query, states).embedding,
                ..example.clone()
            })
            .collect()
    };
    let mean_examples = pooled_with(&zero);
    // The strength the linear map on the mean is chosen at; the query's fits start from it.
    let linear = TrainOptions {
        hidden: None,
        by_language: false,
        ..options.clone()
    };
    let alpha = train(&mean_examples, &linear)?.alpha;

    let labels: Vec<bool> = examples.iter().map(|e| e.label).collect();
    let taught: Vec<bool> = examples.iter().map(|e| e.taught).collect();
    let groups: Vec<&str> = examples.iter().map(|e| e.group.as_str()).collect();
    let (_, fold_of, folds, _) = assign_folds(&labels, &groups, options.folds.max(2), options);
    let x = matrix(&mean_examples);
    let rows = Rows {
        x: &x,
        tokens,
        labels: &labels,
        taught: &taught,
    };
    let fitted: Vec<Result<FoldScores>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..folds)
            .map(|fold| {
                let rows = &rows;
                let fold_of = &fold_of;
                scope.spawn(move || {
                    let (train_rows, held_out): (Vec<usize>, Vec<usize>) =
                        (0..fold_of.len()).partition(|&i| fold_of[i] != fold);
                    let fit = rows.fit(&train_rows, alpha, query_options)?;
                    Ok(FoldScores {
                        mean: fit
                            .mean_head
                            .decision(&rows.x.select(ndarray::Axis(0), &held_out)),
                        attention: held_out
                            .iter()
                            .map(|&i| fit.attention_decision(rows.tokens[i]))
                            .collect(),
                        held_out,
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(HeadError::Fit("a fold's fit panicked".into())))
            })
            .collect()
    });
    let mut mean_decisions = vec![0.0; labels.len()];
    let mut attention_decisions = vec![0.0; labels.len()];
    for scores in fitted {
        let scores = scores?;
        for (k, &i) in scores.held_out.iter().enumerate() {
            mean_decisions[i] = scores.mean[k];
            attention_decisions[i] = scores.attention[k];
        }
    }
    let choice = QueryChoice {
        folds,
        mean_roc_auc: roc_auc(&mean_decisions, &labels).unwrap_or(0.5),
        attention_roc_auc: roc_auc(&attention_decisions, &labels).unwrap_or(0.5),
    };
    if choice.attention_roc_auc <= choice.mean_roc_auc {
        return Ok(AttendedTraining {
            choice,
            chosen: None,
        });
    }
    let every_row: Vec<usize> = (0..labels.len()).collect();
    let query = rows.fit(&every_row, alpha, query_options)?.query;
    let trained = train(&pooled_with(&query), options)?;
    Ok(AttendedTraining {
        chosen: Some((
            AttentionPooling {
                query,
                options: query_options.clone(),
                choice: choice.clone(),
            },
            trained,
        )),
        choice,
    })
}

struct FoldScores {
    held_out: Vec<usize>,
    mean: Array1<f64>,
    attention: Vec<f64>,
}

/// Every row: its mean-pooled input, its token states, label and whether a prompt author taught
/// it.
struct Rows<'a> {
    x: &'a Array2<f64>,
    tokens: &'a [&'a [f32]],
    labels: &'a [bool],
    taught: &'a [bool],
}

/// One fit on some rows: the linear head on the mean it started from, and the query with the
/// linear map trained beside it (in the mean's standardised space).
struct QueryFit {
    mean_head: LinearModel,
    query: Vec<f32>,
    weights: Vec<f32>,
    intercept: f32,
}

impl QueryFit {
    fn attention_decision(&self, tokens: &[f32]) -> f64 {
        let embedding = Pooled::new(&self.query, tokens).embedding;
        let standardised = standardise(&embedding, &self.mean_head);
        f64::from(dot(&self.weights, &standardised) + self.intercept)
    }
}

impl Rows<'_> {
    fn fit(&self, which: &[usize], alpha: f64, options: &QueryOptions) -> Result<QueryFit> {
        let labels: Vec<bool> = which.iter().map(|&i| self.labels[i]).collect();
        let taught: Vec<bool> = which.iter().map(|&i| self.taught[i]).collect();
        let x = self.x.select(ndarray::Axis(0), which);
        let mean_head =
            Standardised::new(&x, &labels, &taught, ColumnScales::Own)?.fit(alpha, None)?;
        let tokens: Vec<&[f32]> = which.iter().map(|&i| self.tokens[i]).collect();
        let row_weights = row_weights(&labels, &taught);
        let (query, weights, intercept) =
            fit_query(&tokens, &labels, &row_weights, &mean_head, alpha, options)?;
        Ok(QueryFit {
            mean_head,
            query,
            weights,
            intercept,
        })
    }
}

/// Minimises, batch by batch, `Σ c_i ℓ_i / Σ c + alpha / (2 Σ_all c) |w|² + decay / 2 |q|²`
/// over the query `q` and the linear map `w`, `b` on the pooled input standardised as
/// `start`'s was: the linear solver's objective (as the hidden layer's fit scales it) plus the
/// query's penalty. Returns the query, the weights and the intercept.
fn fit_query(
    tokens: &[&[f32]],
    labels: &[bool],
    row_weights: &[f64],
    start: &LinearModel,
    alpha: f64,
    options: &QueryOptions,
) -> Result<(Vec<f32>, Vec<f32>, f32)> {
    let width = start.mean.len();
    let total_weight: f64 = row_weights.iter().sum();
    if tokens.is_empty() || total_weight <= 0.0 {
        return Err(HeadError::Fit("a query needs rows of some weight".into()));
    }
    let penalty = (alpha / total_weight) as f32;
    let decay = options.decay as f32;
    let scale: Vec<f32> = start.scale.iter().map(|&s| s as f32).collect();
    let mut weights: Vec<f32> = start.weights.iter().map(|&w| w as f32).collect();
    let mut intercept = start.intercept as f32;
    let mut query = vec![0.0f32; width];
    let mut adam = [Adam::new(width), Adam::new(1), Adam::new(width)];
    let mut order: Vec<usize> = (0..tokens.len()).collect();
    let mut generator = SplitMix::new(options.seed);
    let mut grad_weights = vec![0.0f32; width];
    let mut grad_query = vec![0.0f32; width];
    for _ in 0..options.epochs {
        generator.shuffle(&mut order);
        for batch in order.chunks(options.batch_rows) {
            grad_weights.fill(0.0);
            grad_query.fill(0.0);
            let mut grad_intercept = 0.0f32;
            let batch_weight: f64 = batch.iter().map(|&i| row_weights[i]).sum();
            // The linear map read on the raw pooled input: w_j / scale_j.
            let direction: Vec<f32> = weights.iter().zip(&scale).map(|(w, s)| w / s).collect();
            for &i in batch {
                let pooled = Pooled::new(&query, tokens[i]);
                let x = standardise(&pooled.embedding, start);
                let z = f64::from(dot(&weights, &x) + intercept);
                let target = if labels[i] { 1.0 } else { 0.0 };
                let r = (row_weights[i] * (sigmoid(z) - target) / batch_weight) as f32;
                if r == 0.0 {
                    continue;
                }
                grad_intercept += r;
                for (g, v) in grad_weights.iter_mut().zip(&x) {
                    *g += r * v;
                }
                pooled.add_query_gradient(tokens[i], &direction, r, &mut grad_query);
            }
            for (g, w) in grad_weights.iter_mut().zip(&weights) {
                *g += penalty * w;
            }
            for (g, q) in grad_query.iter_mut().zip(&query) {
                *g += decay * q;
            }
            let [a_weights, a_intercept, a_query] = &mut adam;
            a_weights.step(&mut weights, &grad_weights, options.head_learning_rate);
            a_intercept.step(
                std::slice::from_mut(&mut intercept),
                &[grad_intercept],
                options.head_learning_rate,
            );
            a_query.step(&mut query, &grad_query, options.learning_rate);
        }
    }
    let finite = |v: &[f32]| v.iter().all(|x| x.is_finite());
    if !(finite(&query) && finite(&weights) && intercept.is_finite()) {
        return Err(HeadError::Fit("the attention query's fit diverged".into()));
    }
    Ok((query, weights, intercept))
}

fn standardise(embedding: &[f32], head: &LinearModel) -> Vec<f32> {
    embedding
        .iter()
        .zip(head.mean.iter().zip(&head.scale))
        .map(|(&e, (&m, &s))| ((f64::from(e) - m) / s) as f32)
        .collect()
}

fn matrix(examples: &[Example]) -> Array2<f64> {
    let width = examples.first().map_or(0, |e| e.features.len());
    Array2::from_shape_fn((examples.len(), width), |(i, j)| {
        f64::from(examples[i].features[j])
    })
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Messages of many neutral tokens, some with one marked token among them: the mean dilutes
    /// the mark by the message's length, a query finds it. Sources are named so that folds hold
    /// them out whole.
    fn diluted_rows(count: usize) -> (Vec<Example>, Vec<Vec<f32>>) {
        let mut generator = SplitMix::new(11);
        let mut uniform = move || (generator.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        let width = 6;
        let mut examples = Vec::new();
        let mut tokens = Vec::new();
        for i in 0..count {
            let label = i % 2 == 0;
            let length = 2 + (i * 7) % 23;
            let mut states = Vec::new();
            for _ in 0..length {
                // Neutral tokens point along the first axes, with noise.
                let mut state = vec![1.0 + uniform(), 1.0 + uniform(), 0.0, 0.0, 0.0, 0.0];
                for v in state.iter_mut().skip(2) {
                    *v = (uniform() - 0.5) * 0.6;
                }
                states.extend(state);
            }
            if label {
                // The mark: one token along the last axis, anywhere in the message.
                let at = (i * 5) % length;
                let slot = &mut states[at * width..(at + 1) * width];
                slot.copy_from_slice(&[0.2, 0.1, 0.0, 0.0, 0.0, 2.0]);
            }
            tokens.push(states);
            examples.push(Example {
                features: Vec::new(),
                label,
                language: "en".into(),
                detected_language: "en".into(),
                group: format!("source-{}", i % 7),
                taught: false,
            });
        }
        (examples, tokens)
    }

    #[test]
    fn a_query_learns_a_mark_the_mean_dilutes_and_is_kept() {
        let (examples, tokens) = diluted_rows(420);
        let options = TrainOptions::default();
        let query_options = QueryOptions {
            epochs: 12,
            ..QueryOptions::shipped()
        };
        let tokens: Vec<&[f32]> = tokens.iter().map(Vec::as_slice).collect();
        let trained =
            train_with_attention(&examples, &tokens, 6, &options, &query_options).expect("trained");
        let choice = &trained.choice;
        assert!(
            choice.attention_roc_auc > choice.mean_roc_auc + 0.01,
            "{choice:?}"
        );
        let (pooling, head) = trained.chosen.expect("the query reads better: kept");
        assert!(pooling.query[5] > 0.0, "{:?}", pooling.query);
        assert!(head.cv.roc_auc.unwrap_or(0.0) > 0.95, "{:?}", head.cv);
        // The same rows train the same bits.
        let again =
            train_with_attention(&examples, &tokens, 6, &options, &query_options).expect("trained");
        assert_eq!(again.chosen.expect("kept").0.query, pooling.query);
    }

    #[test]
    fn a_query_that_reads_no_better_is_not_kept() {
        // Every row's mark is its whole message: the mean already sees it.
        let (mut examples, mut tokens) = diluted_rows(200);
        for (example, states) in examples.iter_mut().zip(&mut tokens) {
            let value = if example.label { 1.0 } else { -1.0 };
            *states = [value, 0.5, 0.0, 0.0, 0.0, 0.0].repeat(3);
        }
        let tokens: Vec<&[f32]> = tokens.iter().map(Vec::as_slice).collect();
        let trained = train_with_attention(
            &examples,
            &tokens,
            6,
            &TrainOptions::default(),
            &QueryOptions::shipped(),
        )
        .expect("trained");
        assert!(trained.chosen.is_none(), "{:?}", trained.choice);
    }

    #[test]
    fn token_states_of_the_wrong_shape_are_refused() {
        let (examples, mut tokens) = diluted_rows(40);
        tokens[3].pop();
        let tokens: Vec<&[f32]> = tokens.iter().map(Vec::as_slice).collect();
        let err = train_with_attention(
            &examples,
            &tokens,
            6,
            &TrainOptions::default(),
            &QueryOptions::shipped(),
        )
        .unwrap_err();
        assert!(matches!(err, HeadError::BadFeatures), "{err}");
    }
}
