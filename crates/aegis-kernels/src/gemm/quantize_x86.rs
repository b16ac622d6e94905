//! The int8 product's input quantized on x86 vectors, 16 inputs a step on AVX-512F and 8 on AVX2:
//! the compiler leaves the portable loop's saturating conversions scalar, which made quantizing a
//! ninth of the int8 encoder's time. Both give the portable code's bytes and scales: the largest
//! magnitude is exact in any order, and truncating the shifted value is what `as i32` does to it.
#![allow(unsafe_code)]

use super::tile::{BLOCK, ZERO_POINT};

/// One row, as `int8::quantize_row_body` does it: on AVX-512F where `wide` allows it and the CPU
/// has it, else on AVX2 where the CPU has it (else `false`, nothing written). `wide` follows the
/// tile: the 256-bit tile's CPUs (AVX-VNNI laptops) have no AVX-512, so its products quantize on
/// AVX2 wherever they run, and a machine standing in for a laptop runs the laptop's code.
pub(super) fn quantize_row(row: &[f32], out: &mut [u8], scales: &mut [f32], wide: bool) -> bool {
    assert!(out.len() >= row.len() && scales.len() >= row.len().div_ceil(BLOCK));
    if wide && std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU has just reported AVX-512F, all the function is compiled for; it reads
        // `row` and writes as many bytes of `out` and one scale per block, checked above.
        unsafe { quantize_row_avx512(row, out, scales) };
        return true;
    }
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: as above, for AVX2.
        unsafe { quantize_row_avx2(row, out, scales) };
        return true;
    }
    false
}

/// # Safety
/// The CPU has AVX-512F; `out` is at least as long as `row`.
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
            // SAFETY: the mask loads only `row`'s values from `at < end` up to `end`.
            let v = unsafe { _mm512_maskz_loadu_ps(mask(at), row.as_ptr().add(at)) };
            largest = _mm512_max_ps(largest, _mm512_abs_ps(v));
        }
        let largest = _mm512_reduce_max_ps(largest);
        let inverse = _mm512_set1_ps(if largest > 0.0 { 127.0 / largest } else { 0.0 });
        for at in (block..end).step_by(LANES) {
            // SAFETY: as above.
            let v = unsafe { _mm512_maskz_loadu_ps(mask(at), row.as_ptr().add(at)) };
            let shifted = _mm512_add_ps(_mm512_mul_ps(v, inverse), shift);
            let q = _mm512_min_epi32(
                _mm512_max_epi32(_mm512_cvttps_epi32(shifted), lowest),
                highest,
            );
            // SAFETY: the mask writes only bytes from `at` up to `end`, within `row`'s length and
            // so `out`'s (the caller's promise).
            unsafe {
                _mm512_mask_cvtepi32_storeu_epi8(out.as_mut_ptr().add(at).cast(), mask(at), q)
            };
        }
        *scale = largest / 127.0;
    }
}

/// Whole steps of 8 on AVX2; a block's last few inputs (a row not a multiple of 8 long) in
/// scalar code doing the same operations.
///
/// # Safety
/// The CPU has AVX2; `out` is at least as long as `row`.
#[target_feature(enable = "avx2")]
unsafe fn quantize_row_avx2(row: &[f32], out: &mut [u8], scales: &mut [f32]) {
    use std::arch::x86_64::{
        _mm256_add_ps, _mm256_and_ps, _mm256_castsi256_ps, _mm256_castsi256_si128,
        _mm256_cvttps_epi32, _mm256_extracti128_si256, _mm256_loadu_ps, _mm256_max_epi32,
        _mm256_max_ps, _mm256_min_epi32, _mm256_mul_ps, _mm256_set1_epi32, _mm256_set1_ps,
        _mm256_storeu_ps, _mm_packus_epi16, _mm_packus_epi32, _mm_storel_epi64,
    };
    const LANES: usize = 8;
    let shift = _mm256_set1_ps(ZERO_POINT as f32 + 0.5);
    let (lowest, highest) = (_mm256_set1_epi32(1), _mm256_set1_epi32(255));
    let magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(i32::MAX));
    let scalar = |v: f32, inverse: f32| -> u8 {
        ((v * inverse + (ZERO_POINT as f32 + 0.5)) as i32).clamp(1, 255) as u8
    };
    for (block, scale) in (0..row.len()).step_by(BLOCK).zip(scales.iter_mut()) {
        let end = (block + BLOCK).min(row.len());
        let whole = block + (end - block) / LANES * LANES;
        let mut largest = _mm256_set1_ps(0.0);
        for at in (block..whole).step_by(LANES) {
            // SAFETY: `at + 8 <= whole <= row.len()`.
            let v = unsafe { _mm256_loadu_ps(row.as_ptr().add(at)) };
            largest = _mm256_max_ps(largest, _mm256_and_ps(v, magnitude));
        }
        let mut lanes = [0f32; LANES];
        // SAFETY: `lanes` is 8 f32 of ours.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), largest) };
        let largest = row[whole..end]
            .iter()
            .fold(lanes.into_iter().fold(0f32, f32::max), |m, v| {
                m.max(v.abs())
            });
        let inverse = if largest > 0.0 { 127.0 / largest } else { 0.0 };
        let inverse_lanes = _mm256_set1_ps(inverse);
        for at in (block..whole).step_by(LANES) {
            // SAFETY: as above.
            let v = unsafe { _mm256_loadu_ps(row.as_ptr().add(at)) };
            let shifted = _mm256_add_ps(_mm256_mul_ps(v, inverse_lanes), shift);
            let q = _mm256_min_epi32(
                _mm256_max_epi32(_mm256_cvttps_epi32(shifted), lowest),
                highest,
            );
            // 1..=255 in each lane: the packs' saturation changes nothing.
            let words = _mm_packus_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
            let bytes = _mm_packus_epi16(words, words);
            // SAFETY: 8 bytes from `at`, `at + 8 <= row.len() <= out.len()` (the caller's
            // promise).
            unsafe { _mm_storel_epi64(out.as_mut_ptr().add(at).cast(), bytes) };
        }
        for at in whole..end {
            out[at] = scalar(row[at], inverse);
        }
        *scale = largest / 127.0;
    }
}
