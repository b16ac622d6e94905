//! The f32 tile on AVX2 with FMA: up to [`TILE_ROWS`] rows by one [`PANEL`] of outputs is 12
//! accumulators; each input broadcasts one value of each row and issues two fused multiply-adds
//! against the panel's two weight vectors.
#![allow(unsafe_code)]

use std::arch::x86_64::{
    __m256, _mm256_broadcast_ss, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_setzero_ps,
    _mm256_storeu_ps,
};

use super::tile::{Tile, PANEL, TILE_ROWS};
use crate::gemm::tile::{span, Output};

pub(super) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

/// # Safety
/// The CPU has AVX2 and FMA. (The tile's sizes are checked here.)
pub(super) unsafe fn tile(tile: &Tile, out: Output) {
    // The unsafe loads below rely on these, so they hold in release builds too (once a tile),
    // and the span is checked arithmetic, as `matmul`'s is.
    assert!(tile.rows <= TILE_ROWS && tile.inputs.checked_mul(PANEL) == Some(tile.weights.len()));
    assert!(
        tile.rows >= 1 && span(tile.rows, tile.lda, tile.inputs).is_some_and(|n| tile.a.len() >= n),
        "the tile's rows overrun a"
    );
    let mut sums = [[0f32; PANEL]; TILE_ROWS];
    let (a, w, lda, inputs) = (
        tile.a.as_ptr(),
        tile.weights.as_ptr(),
        tile.lda,
        tile.inputs,
    );
    // SAFETY: the CPU has AVX2 and FMA (the caller's promise); `rows` rows of `inputs` values
    // `lda` apart lie in `a`, and `inputs` inputs of `PANEL` weights in `weights` (asserted
    // above); the sums go to a local array.
    unsafe {
        match tile.rows {
            6 => products::<6>(a, lda, inputs, w, &mut sums),
            5 => products::<5>(a, lda, inputs, w, &mut sums),
            4 => products::<4>(a, lda, inputs, w, &mut sums),
            3 => products::<3>(a, lda, inputs, w, &mut sums),
            2 => products::<2>(a, lda, inputs, w, &mut sums),
            _ => products::<1>(a, lda, inputs, w, &mut sums),
        }
    }
    tile.write(&sums, out);
}

/// `ROWS` rows of `a` times one panel of weights, into the first `ROWS` rows of `sums`.
///
/// # Safety
/// The CPU has AVX2 and FMA; `a` is readable for `ROWS` rows of `inputs` f32 `lda` apart, and
/// `weights` for `inputs * PANEL` f32.
#[target_feature(enable = "avx2,fma")]
unsafe fn products<const ROWS: usize>(
    a: *const f32,
    lda: usize,
    inputs: usize,
    weights: *const f32,
    sums: &mut [[f32; PANEL]; TILE_ROWS],
) {
    let mut low: [__m256; ROWS] = [_mm256_setzero_ps(); ROWS];
    let mut high: [__m256; ROWS] = [_mm256_setzero_ps(); ROWS];
    for input in 0..inputs {
        // SAFETY: input `input < inputs` has its `PANEL` weights, two vectors, at `input *
        // PANEL` (the caller's promise).
        let (w_low, w_high) = unsafe {
            let w = weights.add(input * PANEL);
            (_mm256_loadu_ps(w), _mm256_loadu_ps(w.add(8)))
        };
        for r in 0..ROWS {
            // SAFETY: row `r < ROWS`, input `input < inputs`: within `a` (the caller's promise).
            let x = _mm256_broadcast_ss(unsafe { &*a.add(r * lda + input) });
            low[r] = _mm256_fmadd_ps(x, w_low, low[r]);
            high[r] = _mm256_fmadd_ps(x, w_high, high[r]);
        }
    }
    for r in 0..ROWS {
        // SAFETY: `sums[r]` is `PANEL` (16) f32 of ours: two vectors.
        unsafe {
            _mm256_storeu_ps(sums[r].as_mut_ptr(), low[r]);
            _mm256_storeu_ps(sums[r].as_mut_ptr().add(8), high[r]);
        }
    }
}
