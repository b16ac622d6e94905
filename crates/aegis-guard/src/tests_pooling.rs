//! A head that pools the encoder's token states, around a fake model and encoder.

use std::sync::Arc;

use aegis_engine::testing::{FakeEncoder, FakeModel};

use crate::tests::{encoder_head, validator};
use crate::*;

/// A head that pools token states asks the encoder for them (not the embedding) and scores its
/// pooling of them.
#[test]
fn a_pooling_head_scores_its_pooling_of_the_token_states() {
    let encoder = Arc::new(FakeEncoder::new());
    let mut pooling_head = encoder_head("toxic", vec![4.0, -4.0], 0.0);
    let pooling = aegis_heads::AttentionPooling {
        query: vec![6.0, 0.0],
        options: aegis_heads::QueryOptions::shipped(),
        choice: aegis_heads::QueryChoice {
            folds: 5,
            mean_roc_auc: 0.9,
            attention_roc_auc: 0.92,
        },
    };
    pooling_head.pooling = Some(pooling.clone());
    let guard = Guard::new(
        Arc::new(FakeModel::new(vec![])),
        vec![validator("spam", 1), validator("toxic", 2)],
    )
    .with_encoder(Some(encoder.clone()))
    .with_head(pooling_head)
    .expect("bound to the fake encoder");
    let reading = guard.encoder_reading();
    assert!(reading.token_states && !reading.embedding, "{reading:?}");
    // The fake's token k is [k + 1, 1]: the query leans on the later tokens.
    let text = "you are a bad person";
    let tokens: Vec<f32> = (0..5).flat_map(|k| [k as f32 + 1.0, 1.0]).collect();
    let pooled = pooling.pool(&tokens).expect("pooled");
    let expected = 1.0 / (1.0 + (-(4.0 * pooled[0] - 4.0 * pooled[1])).exp());
    let verdict = guard.check(text).expect("verdict");
    let score = verdict.results[1].learned_score.expect("the head scored");
    assert!(
        (score - expected).abs() < 1e-5,
        "{score} against {expected}"
    );
    assert_eq!(verdict.results[1].decided_by, ScoreSource::Head);
    assert_eq!(
        encoder.last_reading.lock().expect("lock").clone(),
        Some(reading)
    );
}
