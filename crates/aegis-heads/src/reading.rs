//! A head's second map for one kind of violation its own map misses.

use serde::{Deserialize, Serialize};

use crate::record::TrainingRecord;

/// A second linear map on the same input, trained on one kind of violation the head's own map
/// misses (issue "Read who says it": contempt without a rude word shares its direction with no
/// insult, and adding it to the head's rows cost recall on the insults). The message fails when
/// either map fails it: the bias is aligned so that this map reaches the head's threshold exactly
/// where it reaches its own, and the head's score is the higher of the two.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reading {
    /// What it reads for, e.g. `contempt`.
    pub name: String,
    /// Its own threshold, chosen on its benign budget, and the head's it was aligned to.
    pub own_threshold: f64,
    pub aligned_to: f64,
    pub training: TrainingRecord,
    /// The encoder layers whose means it reads, concatenated in this order; absent, it reads
    /// what the head reads. Contempt is read from layer 16: past it the sentence embedding
    /// keeps less of how a sentence is built (README, "Contempt without a rude word").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layers: Option<Vec<usize>>,
    pub weights: Vec<f32>,
    pub bias: f32,
}

impl Reading {
    /// `weights` and `bias` as trained (failing at `own_threshold`), moved in logit space so the
    /// map fails at `head_threshold` for the same messages.
    pub fn aligned(
        name: String,
        training: TrainingRecord,
        layers: Option<Vec<usize>>,
        weights: Vec<f32>,
        bias: f32,
        own_threshold: f64,
        head_threshold: f64,
    ) -> Self {
        let bias = (f64::from(bias) - logit(own_threshold) + logit(head_threshold)) as f32;
        Self {
            name,
            own_threshold,
            aligned_to: head_threshold,
            training,
            layers,
            weights,
            bias,
        }
    }

    /// The same map, moved in logit space to fail at `head_threshold` where it failed at the
    /// threshold it was aligned to (its own decisions unchanged).
    pub fn realigned(&self, head_threshold: f64) -> Self {
        let bias = (f64::from(self.bias) - logit(self.aligned_to) + logit(head_threshold)) as f32;
        Self {
            aligned_to: head_threshold,
            bias,
            ..self.clone()
        }
    }
}

pub(crate) fn logit(p: f64) -> f64 {
    let p = p.clamp(1e-6, 1.0 - 1e-6);
    (p / (1.0 - p)).ln()
}
