//! The arithmetic every map scores with: a logit from a linear map (and a hidden layer), and the
//! sigmoid that makes it a probability.

use crate::error::{HeadError, Result};
use crate::hidden::HiddenLayer;

/// `sigmoid(weights · features + bias + hidden(features))`: a head's own map.
pub(crate) fn probability_with(
    weights: &[f32],
    bias: f32,
    hidden: Option<&HiddenLayer>,
    features: &[f32],
) -> Result<f64> {
    let linear = linear_logit(weights, bias, features)?;
    Ok(sigmoid(
        linear + hidden.map_or(0.0, |layer| layer.logit(features)),
    ))
}

/// `sigmoid(weights · features + bias)`, the map a head's training folds everything into.
pub(crate) fn linear_probability(weights: &[f32], bias: f32, features: &[f32]) -> Result<f64> {
    Ok(sigmoid(linear_logit(weights, bias, features)?))
}

fn linear_logit(weights: &[f32], bias: f32, features: &[f32]) -> Result<f64> {
    if features.len() != weights.len() {
        return Err(HeadError::FeatureWidth {
            expected: weights.len(),
            got: features.len(),
        });
    }
    Ok(weights
        .iter()
        .zip(features)
        .map(|(w, x)| f64::from(*w) * f64::from(*x))
        .sum::<f64>()
        + f64::from(bias))
}

pub(crate) fn sigmoid(z: f64) -> f64 {
    if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        e / (1.0 + e)
    }
}
