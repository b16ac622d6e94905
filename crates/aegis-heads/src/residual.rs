//! Training a head's hidden layer beside its linear map ([`crate::hidden`]): full-batch Adam on
//! the class-balanced log loss, from the fitted linear map and a hidden layer whose output starts
//! at zero, so training starts at the linear head and moves only where the layer helps.
//!
//! Deterministic on every CPU: an integer generator for the starting weights, plain loops in a
//! fixed order (no threads inside a fit, no fused multiply-add, no platform maths but `exp`, which
//! the linear solver uses too), so the same rows give the same bits.

use crate::adam::{starting_weights, Adam};
use crate::error::{HeadError, Result};
use crate::head::sigmoid;
use crate::hidden::{HiddenLayer, HiddenOptions};
use crate::solver::dot32;

/// A fit in the standardised space of the rows it was trained on.
#[derive(Debug, Clone)]
pub(crate) struct ResidualModel {
    pub(crate) weights: Vec<f64>,
    pub(crate) intercept: f64,
    pub(crate) hidden: HiddenLayer,
}

impl ResidualModel {
    /// The decision value of one standardised row.
    pub(crate) fn decision(&self, row: &[f32]) -> f64 {
        let linear: f64 = self
            .weights
            .iter()
            .zip(row)
            .map(|(w, x)| w * f64::from(*x))
            .sum();
        linear + self.intercept + self.hidden.logit(row)
    }
}

/// The rows a fit reads: standardised, row-major in single precision.
pub(crate) struct ResidualRows<'a> {
    pub(crate) x: &'a [f32],
    pub(crate) width: usize,
    pub(crate) labels: &'a [bool],
    pub(crate) row_weights: &'a [f64],
}

/// Minimises `Σ c_i ℓ_i / Σ c + alpha / (2 Σ c) |w|² + decay / 2 (|W|² + |out|²)`, where the
/// first two terms are the linear solver's objective scaled to a mean (so `alpha` means the same
/// and the linear optimum is where this starts).
pub(crate) fn fit_residual(
    rows: &ResidualRows,
    alpha: f64,
    start: (&[f64], f64),
    options: &HiddenOptions,
) -> Result<ResidualModel> {
    let ResidualRows {
        x,
        width,
        labels,
        row_weights,
    } = *rows;
    let n = labels.len();
    let units = options.units;
    if n == 0 || x.len() != n * width || row_weights.len() != n || start.0.len() != width {
        return Err(HeadError::Fit(
            "rows, labels, weights and the linear start differ in shape".into(),
        ));
    }
    if units == 0 {
        return Err(HeadError::Fit(
            "a hidden layer needs at least one unit".into(),
        ));
    }
    let total_weight: f64 = row_weights.iter().sum();
    let penalty = alpha / total_weight;
    let decay = options.decay as f32;

    let mut linear: Vec<f32> = start.0.iter().map(|&w| w as f32).collect();
    let mut intercept = start.1 as f32;
    let mut first = starting_weights(units * width, width, options.seed);
    let mut first_bias = vec![0.0f32; units];
    let mut out = vec![0.0f32; units];
    let mut adam = [
        Adam::new(width),
        Adam::new(1),
        Adam::new(units * width),
        Adam::new(units),
        Adam::new(units),
    ];

    let mut pre = vec![0.0f32; units];
    let mut grad_linear = vec![0.0f32; width];
    let mut grad_first = vec![0.0f32; units * width];
    let mut grad_first_bias = vec![0.0f32; units];
    let mut grad_out = vec![0.0f32; units];
    for _ in 0..options.steps {
        grad_linear.fill(0.0);
        grad_first.fill(0.0);
        grad_first_bias.fill(0.0);
        grad_out.fill(0.0);
        let mut grad_intercept = 0.0f32;
        for (i, row) in x.chunks_exact(width).enumerate() {
            for ((p, unit), bias) in pre
                .iter_mut()
                .zip(first.chunks_exact(width))
                .zip(&first_bias)
            {
                *p = dot32(unit, row) + bias;
            }
            let hidden: f32 = pre.iter().zip(&out).map(|(p, o)| p.max(0.0) * o).sum();
            let z = f64::from(dot32(&linear, row) + intercept + hidden);
            let target = if labels[i] { 1.0 } else { 0.0 };
            // d loss / d z for this row.
            let r = (row_weights[i] * (sigmoid(z) - target) / total_weight) as f32;
            if r == 0.0 {
                continue;
            }
            grad_intercept += r;
            axpy(&mut grad_linear, r, row);
            for (j, &p) in pre.iter().enumerate() {
                if p > 0.0 {
                    grad_out[j] += r * p;
                    let delta = r * out[j];
                    if delta != 0.0 {
                        grad_first_bias[j] += delta;
                        axpy(&mut grad_first[j * width..(j + 1) * width], delta, row);
                    }
                }
            }
        }
        for (g, w) in grad_linear.iter_mut().zip(&linear) {
            *g += penalty as f32 * w;
        }
        for (g, w) in grad_first.iter_mut().zip(&first) {
            *g += decay * w;
        }
        for (g, w) in grad_out.iter_mut().zip(&out) {
            *g += decay * w;
        }
        let rate = options.learning_rate;
        let [a_linear, a_intercept, a_first, a_first_bias, a_out] = &mut adam;
        a_linear.step(&mut linear, &grad_linear, rate);
        a_intercept.step(
            std::slice::from_mut(&mut intercept),
            &[grad_intercept],
            rate,
        );
        a_first.step(&mut first, &grad_first, rate);
        a_first_bias.step(&mut first_bias, &grad_first_bias, rate);
        a_out.step(&mut out, &grad_out, rate);
    }
    let finite = |v: &[f32]| v.iter().all(|x| x.is_finite());
    if !(finite(&linear) && intercept.is_finite() && finite(&first) && finite(&out)) {
        return Err(HeadError::Fit("the hidden layer's fit diverged".into()));
    }
    Ok(ResidualModel {
        weights: linear.iter().map(|&w| f64::from(w)).collect(),
        intercept: f64::from(intercept),
        hidden: HiddenLayer {
            weights: first,
            bias: first_bias,
            out,
        },
    })
}

/// `y += a x`, lane by lane.
fn axpy(y: &mut [f32], a: f32, x: &[f32]) {
    for (y, x) in y.iter_mut().zip(x) {
        *y += a * x;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// XOR-like rows no line separates: the hidden layer learns them from a linear start that
    /// cannot, and two fits give the same bits.
    #[test]
    fn the_hidden_layer_learns_what_no_line_can_and_deterministically() {
        let mut x = Vec::new();
        let mut labels = Vec::new();
        for i in 0..200 {
            let a = if i % 2 == 0 { 1.0 } else { -1.0 };
            let b = if (i / 2) % 2 == 0 { 1.0 } else { -1.0 };
            let jitter = (i % 7) as f32 * 0.01;
            x.extend([a + jitter, b - jitter, 0.5]);
            labels.push(a * b > 0.0);
        }
        let row_weights = vec![1.0; labels.len()];
        let rows = ResidualRows {
            x: &x,
            width: 3,
            labels: &labels,
            row_weights: &row_weights,
        };
        let options = HiddenOptions {
            units: 8,
            steps: 400,
            learning_rate: 3e-2,
            decay: 1e-4,
            seed: 7,
        };
        let fit = fit_residual(&rows, 1.0, (&[0.0, 0.0, 0.0], 0.0), &options).expect("fit");
        let correct = x
            .chunks_exact(3)
            .zip(&labels)
            .filter(|(row, &label)| (fit.decision(row) > 0.0) == label)
            .count();
        assert!(correct >= 190, "{correct} of 200");
        let again = fit_residual(&rows, 1.0, (&[0.0, 0.0, 0.0], 0.0), &options).expect("fit");
        assert_eq!(again.hidden, fit.hidden);
        assert_eq!(again.weights, fit.weights);
    }

    #[test]
    fn shapes_that_do_not_agree_are_refused() {
        let rows = ResidualRows {
            x: &[1.0, 2.0, 3.0],
            width: 2,
            labels: &[true, false],
            row_weights: &[1.0, 1.0],
        };
        let options = HiddenOptions::shipped();
        assert!(fit_residual(&rows, 1.0, (&[0.0, 0.0], 0.0), &options).is_err());
    }
}
