//! A head's hidden layer: a small ReLU layer whose output is added to the linear map's logit.
//!
//! Why (issue 64, item 3): the linear head draws one line through the sentence embedding, and the
//! line that passes a quoted insult or a swear at the traffic also passes contempt said politely.
//! A residual layer on the same input, trained after the linear map with its output starting at
//! zero, bends that line where the rows need it; measured in the harness it caught more contempt
//! on sets other people wrote without giving up the sources' ROC AUC (the guide's research note,
//! "A hidden layer").
//!
//! ReLU rather than GELU: it needs no transcendental function, so the same file gives the same
//! score on every CPU, and its training (`crate::residual`) the same bits.

use serde::{Deserialize, Serialize};

/// How a hidden layer is trained; recorded in the head, so retraining it (the Teach view, `aegis
/// train` again) trains the same kind of head.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HiddenOptions {
    pub units: usize,
    /// Full-batch Adam steps, every one over all the fold's rows.
    pub steps: usize,
    pub learning_rate: f64,
    /// L2 on the hidden layer's weights and output, per row (the data loss is a mean).
    pub decay: f64,
    /// Seeds the layer's starting weights (an integer generator: no platform randomness).
    pub seed: u64,
}

impl HiddenOptions {
    /// The settings the shipped toxic and harassment heads were trained with.
    pub fn shipped() -> Self {
        Self {
            units: 64,
            steps: 100,
            learning_rate: 3e-3,
            decay: 2e-3,
            seed: 1,
        }
    }
}

/// `Σ_j out_j · relu(weights_j · x + bias_j)` on the head's raw input: standardisation and the
/// head's calibration are folded in, as in the linear map.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HiddenLayer {
    /// `units` rows of the input's width, one after another.
    pub weights: Vec<f32>,
    pub bias: Vec<f32>,
    pub out: Vec<f32>,
}

impl HiddenLayer {
    pub fn units(&self) -> usize {
        self.bias.len()
    }

    /// Why the layer cannot score inputs of `width`, if it cannot.
    pub(crate) fn check(&self, width: usize) -> Result<(), String> {
        let units = self.units();
        if units == 0 || self.out.len() != units || self.weights.len() != units * width {
            return Err(format!(
                "the hidden layer's shapes do not agree: {} weights, {} biases, {} outputs for \
                 inputs of width {width}",
                self.weights.len(),
                units,
                self.out.len()
            ));
        }
        let finite = |v: &[f32]| v.iter().all(|x| x.is_finite());
        if !(finite(&self.weights) && finite(&self.bias) && finite(&self.out)) {
            return Err("the hidden layer's weights are not finite".into());
        }
        Ok(())
    }

    /// The layer's share of the logit; `input` has the width it was checked against.
    pub(crate) fn logit(&self, input: &[f32]) -> f64 {
        let width = input.len();
        self.weights
            .chunks_exact(width)
            .zip(&self.bias)
            .zip(&self.out)
            .map(|((row, bias), out)| {
                let pre = crate::solver::dot32(row, input) + bias;
                f64::from(*out) * f64::from(pre.max(0.0))
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_logit_is_the_sum_of_rectified_units() {
        let layer = HiddenLayer {
            weights: vec![1.0, 0.0, 0.0, 1.0],
            bias: vec![0.0, -1.0],
            out: vec![2.0, 3.0],
        };
        assert!(layer.check(2).is_ok());
        // unit 0: relu(1) * 2; unit 1: relu(2 - 1) * 3
        assert!((layer.logit(&[1.0, 2.0]) - 5.0).abs() < 1e-9);
        // both units off
        assert_eq!(layer.logit(&[-1.0, 0.5]), 0.0);
        assert!(layer.check(3).is_err(), "another width");
        let broken = HiddenLayer {
            out: vec![f32::INFINITY, 0.0],
            ..layer
        };
        assert!(broken.check(2).is_err());
    }
}
