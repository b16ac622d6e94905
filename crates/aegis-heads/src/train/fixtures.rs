//! Rows for the training tests: deterministic noise with a known signal.

use crate::example::Example;

/// A fixed pseudo-random stream (no dependency, same everywhere).
pub(crate) fn lcg(seed: &mut u64) -> f32 {
    *seed = seed
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    ((*seed >> 33) as f32 / (1u64 << 31) as f32) - 0.5
}

/// Eight noisy features; the first carries the label (overlapping classes), plus a constant
/// column.
pub(crate) fn fixture(n: usize) -> Vec<Example> {
    let mut seed = 7;
    (0..n)
        .map(|i| {
            let label = i % 3 == 0;
            let mut features: Vec<f32> = (0..8).map(|_| lcg(&mut seed)).collect();
            features[0] += if label { 0.3 } else { -0.3 };
            features.push(1.0);
            let language = if i % 2 == 0 { "id" } else { "en" };
            Example {
                features,
                label,
                language: language.into(),
                detected_language: language.into(),
                group: format!("source-{}", i % 7),
                taught: false,
            }
        })
        .collect()
}
