//! One adaptation for every validator at once: a logistic head per validator on the adapted
//! sentence embedding, trained jointly with the low-rank updates. The heads steer the
//! adaptation, and are kept with it ([`SteeringHeads`]): cross-fitting scores each fold's
//! held-out rows with them (stacking on scores, where embeddings from different folds' adapters
//! are not comparable).

use std::time::{Duration, Instant};

use aegis_engine::SplitMix64;
use candle_core::{DType, Device, Tensor, Var};
use candle_nn::optim::{AdamW, Optimizer, ParamsAdamW};

use crate::error::{AdaptError, Result};
use crate::top::AdaptedTop;

/// A training text and its label for each validator (in the run's order; `None`: not labelled).
#[derive(Debug, Clone, PartialEq)]
pub struct TrainingText {
    pub text: String,
    pub labels: Vec<Option<bool>>,
    /// Its source (for rows the project wrote, with their language and kind): validation holds
    /// out whole groups, as the heads' folds do.
    pub group: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TrainingOptions {
    pub epochs: usize,
    /// Peak learning rate of the updates (warm-up over the first 5% of steps, then linear decay).
    pub learning_rate: f64,
    /// Of the steering heads, which start at zero and must grow fast.
    pub head_learning_rate: f64,
    /// Tokens in one optimiser step (whole texts).
    pub batch_tokens: usize,
    pub seed: u64,
    /// Share of the groups held out to decide when to stop: the updates kept are those with the
    /// lowest loss on them, measured every `validate_every` steps. Zero trains to the end.
    pub validation_share: f64,
    pub validate_every: usize,
}

impl Default for TrainingOptions {
    fn default() -> Self {
        Self {
            epochs: 2,
            learning_rate: 2e-4,
            head_learning_rate: 1e-2,
            batch_tokens: 2048,
            seed: 20_261_126,
            validation_share: 0.2,
            validate_every: 40,
        }
    }
}

/// What a training run did, for its log and its report.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainingReport {
    pub texts: usize,
    pub left_out: usize,
    pub steps: usize,
    /// Mean loss over each epoch's steps.
    pub epoch_losses: Vec<f64>,
    /// Texts held out for validation, and the validation loss at each check (step, loss).
    pub validation_texts: usize,
    pub validation_losses: Vec<(usize, f64)>,
    /// The step whose updates were kept.
    pub kept_step: usize,
    pub elapsed: Duration,
    /// The steering heads as they stood at the kept step, matching the updates kept.
    pub steering: SteeringHeads,
}

/// One logistic map per validator on the adapted (unit) sentence embedding, the gain folded in.
#[derive(Debug, Clone, PartialEq)]
pub struct SteeringHeads {
    /// `weights[v]`: validator `v`'s weights, one per embedding dimension.
    pub weights: Vec<Vec<f32>>,
    pub bias: Vec<f32>,
}

impl SteeringHeads {
    fn from_vars(head: &Tensor, bias: &Tensor) -> Result<Self> {
        let weights = (head.t()? * EMBEDDING_GAIN)?.to_vec2::<f32>()?;
        let bias = bias.flatten_all()?.to_vec1::<f32>()?;
        Ok(Self { weights, bias })
    }

    /// Validator `v`'s probability for `embedding`: `sigmoid(w · x + b)`.
    pub fn probability(&self, v: usize, embedding: &[f32]) -> Result<f64> {
        let weights = self
            .weights
            .get(v)
            .ok_or_else(|| AdaptError::Invalid(format!("no steering head for validator {v}")))?;
        if weights.len() != embedding.len() {
            return Err(AdaptError::Invalid(format!(
                "an embedding of width {} for a steering head of width {}",
                embedding.len(),
                weights.len()
            )));
        }
        let z: f64 = weights
            .iter()
            .zip(embedding)
            .map(|(&w, &x)| f64::from(w) * f64::from(x))
            .sum::<f64>()
            + f64::from(self.bias[v]);
        Ok(1.0 / (1.0 + (-z).exp()))
    }
}

/// Progress of a run, as steps finish.
#[derive(Debug, Clone, PartialEq)]
pub struct StepProgress {
    pub epoch: usize,
    pub step: usize,
    pub steps: usize,
    pub loss: f64,
    pub elapsed: Duration,
}

/// Steering heads' inputs are unit vectors: this factor lets their weights start at a scale the
/// optimiser reaches in a few steps.
const EMBEDDING_GAIN: f64 = 8.0;

/// Trains `top`'s updates on `states[i]` (bf16 `[tokens, hidden]`, `None` = left out) labelled by
/// `texts[i]`.
pub fn train(
    top: &AdaptedTop,
    states: &[Option<Tensor>],
    texts: &[TrainingText],
    validators: usize,
    options: &TrainingOptions,
    mut progress: impl FnMut(&StepProgress),
) -> Result<TrainingReport> {
    let started = Instant::now();
    let labelled: Vec<usize> = (0..texts.len())
        .filter(|&i| states[i].is_some() && texts[i].labels.iter().any(Option::is_some))
        .collect();
    let (mut usable, mut held_out): (Vec<usize>, Vec<usize>) = labelled
        .iter()
        .partition(|&&i| !held_out_group(&texts[i].group, options));
    if usable.is_empty() {
        // Too few groups to hold any out: train on all, to the end.
        tracing::warn!("every group fell in the validation share; training on all of them");
        usable = std::mem::take(&mut held_out);
    }
    if usable.is_empty() {
        return Err(AdaptError::Invalid("no labelled text to train on".into()));
    }
    let weights = class_weights(texts, &labelled, validators);
    let held_out_batches = batches(&held_out, states, options.batch_tokens);
    let hidden = top.output_dimensions();
    let head = Var::zeros((hidden, validators), DType::F32, &Device::Cpu)?;
    let bias = Var::zeros((1, validators), DType::F32, &Device::Cpu)?;
    let adamw = |vars: Vec<Var>, lr: f64| {
        AdamW::new(
            vars,
            ParamsAdamW {
                lr,
                weight_decay: 0.0,
                ..Default::default()
            },
        )
    };
    let mut update_optimiser = adamw(top.vars(), options.learning_rate)?;
    let mut head_optimiser = adamw(vec![head.clone(), bias.clone()], options.head_learning_rate)?;
    let mut random = SplitMix64::new(options.seed);
    let batches_per_epoch = batches(&usable, states, options.batch_tokens).len();
    let steps = batches_per_epoch * options.epochs;
    let warmup = (steps / 20).max(1);
    let mut step = 0;
    let mut epoch_losses = Vec::with_capacity(options.epochs);
    let mut validation_losses = Vec::new();
    // The lowest validation loss, its step, and the updates and steering heads at that step.
    let mut best: Option<(f64, usize, Vec<Tensor>)> = None;
    let forward_loss = |batch: &[usize]| -> Result<Tensor> {
        let (input, lengths) = joined_states(batch, states)?;
        let embedding = top.forward(&input, &lengths)?;
        let logits = (embedding * EMBEDDING_GAIN)?
            .matmul(head.as_tensor())?
            .broadcast_add(bias.as_tensor())?;
        let (targets, mask) = batch_targets(texts, batch, &weights, validators)?;
        weighted_logistic_loss(&logits, &targets, &mask)
    };
    let mut validate = |step: usize| -> Result<()> {
        if held_out_batches.is_empty() {
            return Ok(());
        }
        let mut total = 0.0;
        for batch in &held_out_batches {
            total += forward_loss(batch)?.to_scalar::<f32>()? as f64;
        }
        let loss = total / held_out_batches.len() as f64;
        validation_losses.push((step, loss));
        tracing::info!(step, loss, "validation");
        if best.as_ref().is_none_or(|(b, _, _)| loss < *b) {
            let kept = top
                .vars()
                .iter()
                .chain([&head, &bias])
                .map(|v| v.as_tensor().copy())
                .collect::<candle_core::Result<_>>()?;
            best = Some((loss, step, kept));
        }
        Ok(())
    };
    for epoch in 0..options.epochs {
        let mut order = usable.clone();
        random.shuffle(&mut order);
        let mut total = 0.0;
        let epoch_batches = batches(&order, states, options.batch_tokens);
        for batch in &epoch_batches {
            let factor = if step < warmup {
                (step + 1) as f64 / warmup as f64
            } else {
                (steps - step) as f64 / (steps - warmup).max(1) as f64
            };
            update_optimiser.set_learning_rate(options.learning_rate * factor);
            head_optimiser.set_learning_rate(options.head_learning_rate * factor.max(0.1));
            let loss = forward_loss(batch)?;
            let grads = loss.backward()?;
            update_optimiser.step(&grads)?;
            head_optimiser.step(&grads)?;
            let loss = loss.to_scalar::<f32>()? as f64;
            total += loss;
            step += 1;
            progress(&StepProgress {
                epoch: epoch + 1,
                step,
                steps,
                loss,
                elapsed: started.elapsed(),
            });
            if step % options.validate_every.max(1) == 0 || step == steps {
                validate(step)?;
            }
        }
        epoch_losses.push(total / epoch_batches.len().max(1) as f64);
    }
    let kept_step = match best {
        Some((_, step, kept)) => {
            let vars = top.vars();
            for (var, value) in vars.iter().chain([&head, &bias]).zip(kept) {
                var.set(&value)?;
            }
            step
        }
        None => steps,
    };
    Ok(TrainingReport {
        texts: usable.len(),
        left_out: texts.len() - labelled.len(),
        validation_texts: held_out.len(),
        validation_losses,
        kept_step,
        steps,
        epoch_losses,
        elapsed: started.elapsed(),
        steering: SteeringHeads::from_vars(head.as_tensor(), bias.as_tensor())?,
    })
}

/// Whether `group` is held out for validation: a hash of its name against the share, so the
/// same groups are held out on every run.
fn held_out_group(group: &str, options: &TrainingOptions) -> bool {
    let mut hash = SplitMix64::new(options.seed);
    let mut value = hash.next_u64();
    for byte in group.bytes() {
        value = SplitMix64::new(value ^ u64::from(byte)).next_u64();
    }
    (value % 10_000) as f64 / 10_000.0 < options.validation_share
}

/// The states of `batch`'s texts end to end in f32, and each text's length: the top's input.
pub(crate) fn joined_states(
    batch: &[usize],
    states: &[Option<Tensor>],
) -> Result<(Tensor, Vec<usize>)> {
    let parts: Vec<&Tensor> = batch.iter().filter_map(|&i| states[i].as_ref()).collect();
    let lengths: Vec<usize> = parts
        .iter()
        .map(|s| s.dim(0))
        .collect::<candle_core::Result<_>>()?;
    Ok((Tensor::cat(&parts, 0)?.to_dtype(DType::F32)?, lengths))
}

/// Consecutive texts of `order` in groups of about `budget` tokens.
pub(crate) fn batches(
    order: &[usize],
    states: &[Option<Tensor>],
    budget: usize,
) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut current = Vec::new();
    let mut tokens = 0;
    for &i in order {
        let len = states[i].as_ref().map_or(0, |s| s.dims()[0]);
        if !current.is_empty() && tokens + len > budget {
            out.push(std::mem::take(&mut current));
            tokens = 0;
        }
        current.push(i);
        tokens += len;
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Per validator, the weight of a positive and of a negative, so each class carries half of the
/// validator's loss whatever its balance.
fn class_weights(texts: &[TrainingText], usable: &[usize], validators: usize) -> Vec<(f32, f32)> {
    (0..validators)
        .map(|v| {
            let (mut positives, mut negatives) = (0usize, 0usize);
            for &i in usable {
                match texts[i].labels.get(v).copied().flatten() {
                    Some(true) => positives += 1,
                    Some(false) => negatives += 1,
                    None => {}
                }
            }
            let known = (positives + negatives) as f32;
            let weight = |n: usize| {
                if n == 0 {
                    0.0
                } else {
                    known / (2.0 * n as f32)
                }
            };
            (weight(positives), weight(negatives))
        })
        .collect()
}

fn batch_targets(
    texts: &[TrainingText],
    batch: &[usize],
    weights: &[(f32, f32)],
    validators: usize,
) -> Result<(Tensor, Tensor)> {
    let mut targets = Vec::with_capacity(batch.len() * validators);
    let mut mask = Vec::with_capacity(batch.len() * validators);
    for &i in batch {
        for (v, &(positive, negative)) in weights.iter().enumerate() {
            let (target, weight) = match texts[i].labels.get(v).copied().flatten() {
                Some(true) => (1f32, positive),
                Some(false) => (0.0, negative),
                None => (0.0, 0.0),
            };
            targets.push(target);
            mask.push(weight);
        }
    }
    let shape = (batch.len(), validators);
    Ok((
        Tensor::from_vec(targets, shape, &Device::Cpu)?,
        Tensor::from_vec(mask, shape, &Device::Cpu)?,
    ))
}

/// Binary cross-entropy on logits, weighted per cell: `max(z, 0) - z·y + log(1 + e^-|z|)`.
fn weighted_logistic_loss(logits: &Tensor, targets: &Tensor, weights: &Tensor) -> Result<Tensor> {
    let softplus = ((logits.abs()?.neg()?.exp()? + 1.0)?.log()? + logits.relu()?)?;
    let loss = (softplus - (logits * targets)?)?;
    let total = weights.sum_all()?.to_scalar::<f32>()?.max(f32::EPSILON) as f64;
    Ok(((loss * weights)?.sum_all()? / total)?)
}
