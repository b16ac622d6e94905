//! The int8 product's input quantized on AVX-512F, 16 inputs a step: the compiler leaves the
//! portable loop's saturating conversions scalar, which made quantizing a ninth of the int8
//! encoder's time.
#![allow(unsafe_code)]

use super::tile::{BLOCK, ZERO_POINT};

/// One row, as `int8::quantize_row_body` does it, where the CPU has AVX-512F (else `false`,
/// nothing written). The same bytes and scales as the portable code: the largest magnitude is
/// exact in any order, and truncating the shifted value is what `as i32` does to it.
pub(super) fn quantize_row(row: &[f32], out: &mut [u8], scales: &mut [f32]) -> bool {
    if !std::arch::is_x86_feature_detected!("avx512f") {
        return false;
    }
    assert!(out.len() >= row.len() && scales.len() >= row.len().div_ceil(BLOCK));
    // SAFETY: the CPU has just reported AVX-512F, all the function is compiled for; it reads
    // `row` and writes as many bytes of `out` and one scale per block, checked above.
    unsafe { quantize_row_avx512(row, out, scales) };
    true
}

#[target_feature(enable = "avx512f")]
unsafe fn quantize_row_avx512(row: &[f32], out: &mut [u8], scales: &mut [f32]) {
    use std::arch::x86_64::{
        _mm512_abs_ps, _mm512_add_ps, _mm512_cvttps_epi32, _mm512_mask_cvtepi32_storeu_epi8,
        _mm512_maskz_loadu_ps, _mm512_max_epi32, _mm512_max_ps, _mm512_min_epi32, _mm512_mul_ps,
        _mm512_reduce_max_ps, _mm512_set1_epi32, _mm512_set1_ps,
    };
    const LANES: usize = 16;
    let shift = _mm512_set1_ps(ZERO_POINT as f32 + 0.5);
    let (lowest, highest) = (_mm512_set1_epi32(1), _mm512_set1_epi32(255));
    for (block, scale) in (0..row.len()).step_by(BLOCK).zip(scales.iter_mut()) {
        let end = (block + BLOCK).min(row.len());
        let mask = |at: usize| -> u16 {
            let count = (end - at).min(LANES);
            ((1u32 << count) - 1) as u16
        };
        let mut largest = _mm512_set1_ps(0.0);
        for at in (block..end).step_by(LANES) {
            let v = _mm512_maskz_loadu_ps(mask(at), row.as_ptr().add(at));
            largest = _mm512_max_ps(largest, _mm512_abs_ps(v));
        }
        let largest = _mm512_reduce_max_ps(largest);
        let inverse = _mm512_set1_ps(if largest > 0.0 { 127.0 / largest } else { 0.0 });
        for at in (block..end).step_by(LANES) {
            let v = _mm512_maskz_loadu_ps(mask(at), row.as_ptr().add(at));
            let shifted = _mm512_add_ps(_mm512_mul_ps(v, inverse), shift);
            let q = _mm512_min_epi32(
                _mm512_max_epi32(_mm512_cvttps_epi32(shifted), lowest),
                highest,
            );
            _mm512_mask_cvtepi32_storeu_epi8(out.as_mut_ptr().add(at).cast(), mask(at), q);
        }
        *scale = largest / 127.0;
    }
}
