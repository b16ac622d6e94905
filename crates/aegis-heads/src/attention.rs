//! Attention pooling (issue 64, item 3): a learned query weighs the message's tokens before their
//! states are averaged into the head's input.
//!
//! Why: the sentence embedding is the mean of every token's state, so an insult followed by two
//! ordinary sentences reaches the head a third as strong, and one direction has to serve both the
//! insult and its dilution. A query that scores each token lets the head read the tokens that
//! matter at full strength. In the research harness, with toxic's diluted rows, it caught an
//! insult followed by a dinner question 25 / 20% → 51 / 59% (en / id) and gave back most of what
//! the diluted rows cost on held-out sources (the guide's research note, "Attention pooling with
//! the diluted rows").
//!
//! It reads each token's state after the encoder's dense layers, which is what
//! `llama-server --pooling none` serves: the dense layers are linear, so the mean of those states
//! is the sentence embedding before its normalisation, and a head that pools reads a server as
//! it reads the local encoder. With the query at zero the pooling is exactly that mean: training
//! starts at the sentence embedding and moves only where weighting tokens helps.

mod fit;

use serde::{Deserialize, Serialize};

pub use fit::{train_with_attention, AttendedTraining};

/// A head's pooling of the message's token states, in place of the sentence embedding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttentionPooling {
    /// Scores each token on the direction of its state, `query · s / |s|`: the states' norms
    /// differ several-fold (the first and last tokens longest), so scoring raw states would let a
    /// few tokens take all the weight before anything was learned.
    pub query: Vec<f32>,
    pub options: QueryOptions,
    /// How the query did on held-out folds against the mean it replaces.
    pub choice: QueryChoice,
}

/// How a query is trained; recorded in the head, so retraining it trains the same kind of head.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryOptions {
    /// Passes over the rows, in minibatches of `batch_rows`. Longer overfits the training
    /// sources (8 epochs lost 0.05 ROC AUC on a held-out source in the harness).
    pub epochs: usize,
    pub batch_rows: usize,
    /// The query's Adam rate; the linear map moves beside it at `head_learning_rate`.
    pub learning_rate: f64,
    pub head_learning_rate: f64,
    /// L2 on the query (per row: the data loss is a mean). A strong one keeps the query short and
    /// the pooling near the mean (1e-2 halved the gain in the harness).
    pub decay: f64,
    /// Seeds the order the rows are read in (an integer generator: no platform randomness).
    pub seed: u64,
}

impl QueryOptions {
    /// The settings the research harness found (session 66): 4 epochs of 128-row batches.
    pub fn shipped() -> Self {
        Self {
            epochs: 4,
            batch_rows: 128,
            learning_rate: 1e-2,
            head_learning_rate: 1e-3,
            decay: 2e-3,
            seed: 1,
        }
    }
}

/// The held-out folds' ROC AUC of a linear head on the mean and of one trained with a query,
/// each fold's query fitted without that fold's rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryChoice {
    pub folds: usize,
    pub mean_roc_auc: f64,
    pub attention_roc_auc: f64,
}

impl AttentionPooling {
    /// The head's input for a message whose token states (after the dense layers) are `tokens`,
    /// row-major at the query's width: the weighted mean, normalised as the sentence embedding is.
    pub fn pool(&self, tokens: &[f32]) -> Result<Vec<f32>, String> {
        let width = self.query.len();
        if width == 0 || tokens.is_empty() || !tokens.len().is_multiple_of(width) {
            return Err(format!(
                "{} token values do not make whole states of width {width}",
                tokens.len()
            ));
        }
        Ok(Pooled::new(&self.query, tokens).embedding)
    }

    /// Why the pooling cannot feed a head whose input has `width` values, if it cannot.
    pub(crate) fn check(&self, width: usize) -> Result<(), String> {
        if self.query.len() != width {
            return Err(format!(
                "its attention query has {} values for an input of {width}",
                self.query.len()
            ));
        }
        if self.query.iter().any(|q| !q.is_finite()) {
            return Err("its attention query is not finite".into());
        }
        Ok(())
    }
}

/// One message pooled with a query, with what the query's gradient needs.
pub(crate) struct Pooled {
    /// Each token's share of the mean (softmax of its score).
    shares: Vec<f32>,
    /// Each token's state's norm, clamped away from zero.
    norms: Vec<f32>,
    /// The weighted mean before normalisation, and its norm.
    sum: Vec<f32>,
    sum_norm: f32,
    pub(crate) embedding: Vec<f32>,
}

/// Norms below this count as this: a zero state has no direction to score.
const SMALLEST_NORM: f32 = 1e-6;

impl Pooled {
    /// `tokens` holds whole states of the query's width (checked by the callers).
    pub(crate) fn new(query: &[f32], tokens: &[f32]) -> Self {
        let width = query.len();
        let norms: Vec<f32> = tokens
            .chunks_exact(width)
            .map(|state| dot(state, state).sqrt().max(SMALLEST_NORM))
            .collect();
        let scores: Vec<f32> = tokens
            .chunks_exact(width)
            .zip(&norms)
            .map(|(state, norm)| dot(query, state) / norm)
            .collect();
        let top = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut shares: Vec<f32> = scores.iter().map(|s| (s - top).exp()).collect();
        let total: f32 = shares.iter().sum();
        for share in &mut shares {
            *share /= total;
        }
        let mut sum = vec![0.0f32; width];
        for (state, &share) in tokens.chunks_exact(width).zip(&shares) {
            for (s, x) in sum.iter_mut().zip(state) {
                *s += share * x;
            }
        }
        let sum_norm = dot(&sum, &sum).sqrt().max(SMALLEST_NORM);
        let embedding = sum.iter().map(|s| s / sum_norm).collect();
        Self {
            shares,
            norms,
            sum,
            sum_norm,
            embedding,
        }
    }

    /// Adds `scale · d(direction · embedding) / d query` to `gradient`: the chain through the
    /// normalisation, the weighted mean and the softmax.
    pub(crate) fn add_query_gradient(
        &self,
        tokens: &[f32],
        direction: &[f32],
        scale: f32,
        gradient: &mut [f32],
    ) {
        let width = direction.len();
        // d/d sum of direction · sum / |sum|.
        let along = dot(&self.embedding, direction);
        let by_sum: Vec<f32> = direction
            .iter()
            .zip(&self.embedding)
            .map(|(d, e)| (d - e * along) / self.sum_norm)
            .collect();
        let by_sum_dot_sum = dot(&by_sum, &self.sum);
        for ((state, &share), &norm) in tokens
            .chunks_exact(width)
            .zip(&self.shares)
            .zip(&self.norms)
        {
            // d/d score of this token, then d score / d query = state / |state|.
            let by_score = share * (dot(&by_sum, state) - by_sum_dot_sum);
            let step = scale * by_score / norm;
            if step != 0.0 {
                for (g, x) in gradient.iter_mut().zip(state) {
                    *g += step * x;
                }
            }
        }
    }
}

/// A plain sequential dot product: the same bits on every CPU.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::head::{Encoder, Head};

    fn pooling(query: Vec<f32>) -> AttentionPooling {
        AttentionPooling {
            query,
            options: QueryOptions::shipped(),
            choice: QueryChoice {
                folds: 5,
                mean_roc_auc: 0.9,
                attention_roc_auc: 0.91,
            },
        }
    }

    #[test]
    fn a_zero_query_pools_to_the_normalised_mean() {
        let tokens = [3.0, 0.0, 1.0, 4.0, -1.0, 2.0];
        let pooled = pooling(vec![0.0; 2]).pool(&tokens).expect("whole states");
        let mean = [1.0f32, 2.0];
        let norm = (mean[0] * mean[0] + mean[1] * mean[1]).sqrt();
        for (p, m) in pooled.iter().zip(mean) {
            assert!((p - m / norm).abs() < 1e-6, "{pooled:?}");
        }
        assert!(pooling(vec![0.0; 2]).pool(&tokens[..5]).is_err());
        assert!(pooling(vec![0.0; 2]).pool(&[]).is_err());
    }

    #[test]
    fn a_query_weighs_the_tokens_it_points_at() {
        // Two tokens along x, one along y; a query along y puts most of the weight on the third.
        let tokens = [5.0, 0.0, 2.0, 0.0, 0.0, 1.0];
        let pooled = pooling(vec![0.0, 6.0]).pool(&tokens).expect("pooled");
        assert!(pooled[1] > 0.9, "{pooled:?}");
        // Scored on directions: the first token's length does not buy it weight.
        let longer = [500.0, 0.0, 2.0, 0.0, 0.0, 1.0];
        let scored = Pooled::new(&[0.0, 6.0], &longer);
        assert!((scored.shares[0] - scored.shares[1]).abs() < 1e-6);
    }

    /// The chained gradient matches finite differences of `direction · pool(query)`.
    #[test]
    fn the_query_gradient_matches_finite_differences() {
        let width = 3;
        let tokens = [
            1.0, 0.5, -0.2, 0.3, -1.2, 0.8, -0.7, 0.1, 0.9, 2.0, 1.0, 0.0,
        ];
        let query = [0.4f32, -0.3, 0.7];
        let direction = [0.9f32, -0.5, 0.25];
        let value = |q: &[f32]| -> f64 {
            let pooled = Pooled::new(q, &tokens);
            pooled
                .embedding
                .iter()
                .zip(&direction)
                .map(|(e, d)| f64::from(e * d))
                .sum()
        };
        let mut gradient = vec![0.0f32; width];
        Pooled::new(&query, &tokens).add_query_gradient(&tokens, &direction, 1.0, &mut gradient);
        for j in 0..width {
            let step = 1e-2f32;
            let mut up = query;
            up[j] += step;
            let mut down = query;
            down[j] -= step;
            let numeric = (value(&up) - value(&down)) / (2.0 * f64::from(step));
            assert!(
                (numeric - f64::from(gradient[j])).abs() < 2e-3,
                "{j}: numeric {numeric}, chained {}",
                gradient[j]
            );
        }
    }

    #[test]
    fn a_query_of_another_width_or_not_finite_is_refused() {
        assert!(pooling(vec![0.0; 3]).check(3).is_ok());
        assert!(pooling(vec![0.0; 3]).check(4).is_err());
        assert!(pooling(vec![0.0, f32::NAN, 0.0]).check(3).is_err());
    }

    /// A pooling round-trips with its head; one on a decoder head or of another width is refused.
    #[test]
    fn a_pooling_is_kept_in_the_file_and_checked_when_read() {
        let mut pooling_head = crate::head::tests::head();
        pooling_head.features.encoder = Encoder::EmbeddingGemma;
        pooling_head.features.layers.clear();
        pooling_head.pooling = Some(AttentionPooling {
            query: vec![0.5, -0.25],
            options: crate::QueryOptions::shipped(),
            choice: crate::QueryChoice {
                folds: 5,
                mean_roc_auc: 0.9,
                attention_roc_auc: 0.92,
            },
        });
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("toxic.json");
        pooling_head.save(&path).expect("save");
        assert_eq!(
            Head::load(&path).expect("load").pooling,
            pooling_head.pooling
        );
        let mut decoder = pooling_head.clone();
        decoder.features.encoder = Encoder::Decoder;
        decoder.features.layers = vec![8];
        decoder.save(&path).expect("save");
        let err = Head::load(&path).unwrap_err().to_string();
        assert!(err.contains("pools token states"), "{err}");
        if let Some(pooling) = pooling_head.pooling.as_mut() {
            pooling.query.push(1.0);
        }
        pooling_head.save(&path).expect("save");
        let err = Head::load(&path).unwrap_err().to_string();
        assert!(err.contains("attention query has 3 values"), "{err}");
    }
}
