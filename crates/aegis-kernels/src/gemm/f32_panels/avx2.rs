//! The f32 tile on AVX2 with FMA: up to [`TILE_ROWS`] rows by one [`PANEL`] of outputs is 12
//! accumulators; each input broadcasts one value of each row and issues two fused multiply-adds
//! against the panel's two weight vectors.
#![allow(unsafe_code)]

use std::arch::x86_64::{
    __m256, _mm256_broadcast_ss, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_setzero_ps,
    _mm256_storeu_ps,
};

use super::tile::{Tile, PANEL, TILE_ROWS};
use crate::gemm::tile::Output;

pub(super) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

pub(super) fn tile(tile: &Tile, out: Output) {
    // The unsafe loads below rely on these, so they hold in release builds too (once a tile).
    assert!(tile.rows <= TILE_ROWS && tile.weights.len() == tile.inputs * PANEL);
    assert!(tile.rows >= 1 && tile.a.len() >= (tile.rows - 1) * tile.lda + tile.inputs);
    let mut sums = [[0f32; PANEL]; TILE_ROWS];
    // SAFETY: `run_panels` calls this only when `available()` said the CPU has AVX2 and FMA;
    // `rows` rows of `inputs` values `lda` apart lie in `a`, and `inputs` inputs of `PANEL`
    // weights in `weights` (checked above and by `matmul`); the sums go to a local array.
    unsafe {
        let (a, w, lda, inputs) = (
            tile.a.as_ptr(),
            tile.weights.as_ptr(),
            tile.lda,
            tile.inputs,
        );
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
        let w = weights.add(input * PANEL);
        let (w_low, w_high) = (_mm256_loadu_ps(w), _mm256_loadu_ps(w.add(8)));
        for r in 0..ROWS {
            let x = _mm256_broadcast_ss(&*a.add(r * lda + input));
            low[r] = _mm256_fmadd_ps(x, w_low, low[r]);
            high[r] = _mm256_fmadd_ps(x, w_high, high[r]);
        }
    }
    for r in 0..ROWS {
        _mm256_storeu_ps(sums[r].as_mut_ptr(), low[r]);
        _mm256_storeu_ps(sums[r].as_mut_ptr().add(8), high[r]);
    }
}
