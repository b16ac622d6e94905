//! The product on AVX-512 BF16: a tile of up to [`TILE_ROWS`] rows by one [`PANEL`] of outputs
//! is 16 accumulators; each step broadcasts one input pair of a row and issues two `vdpbf16ps`
//! (32 multiply-adds each) against the panel's two weight vectors.
#![allow(unsafe_code)]

use std::arch::x86_64::{
    __m512, __m512bh, __m512i, _mm512_dpbf16_ps, _mm512_loadu_si512, _mm512_mask_storeu_ps,
    _mm512_set1_epi32, _mm512_setzero_ps, _mm512_storeu_ps,
};

use super::tile::{Output, PackedRows, PANEL, TILE_ROWS};

pub(super) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bf16")
}

/// One panel of the product: `weights` is its packed pairs, `a` the rows in the same pairs.
///
/// # Safety
/// The CPU has AVX-512F and AVX-512 BF16. (The sizes are checked here.)
pub(super) unsafe fn panel(
    a: &PackedRows,
    rows: usize,
    weights: &[u32],
    panel: usize,
    out: Output,
) {
    let first_column = panel * PANEL;
    let columns = PANEL.min(out.columns - first_column);
    let pairs = a.pairs;
    assert_eq!(weights.len(), pairs * PANEL);
    for start in (0..rows).step_by(TILE_ROWS) {
        let block = TILE_ROWS.min(rows - start);
        let a_rows = &a.data[start * pairs..(start + block) * pairs];
        // SAFETY: the CPU has the features (the caller's promise); `tile` reads `block` rows of
        // `pairs` from `a_rows` and `pairs * PANEL` weights, both sized so above, and writes
        // `columns` (1 to `PANEL`) columns of `block` rows of `c` at row `start`, inside what
        // `matmul` checked and owned by this panel alone.
        unsafe {
            let c = out.ptr().add(start * out.ldc + first_column);
            match block {
                8 => tile::<8>(
                    a_rows.as_ptr(),
                    pairs,
                    weights.as_ptr(),
                    c,
                    out.ldc,
                    columns,
                ),
                7 => tile::<7>(
                    a_rows.as_ptr(),
                    pairs,
                    weights.as_ptr(),
                    c,
                    out.ldc,
                    columns,
                ),
                6 => tile::<6>(
                    a_rows.as_ptr(),
                    pairs,
                    weights.as_ptr(),
                    c,
                    out.ldc,
                    columns,
                ),
                5 => tile::<5>(
                    a_rows.as_ptr(),
                    pairs,
                    weights.as_ptr(),
                    c,
                    out.ldc,
                    columns,
                ),
                4 => tile::<4>(
                    a_rows.as_ptr(),
                    pairs,
                    weights.as_ptr(),
                    c,
                    out.ldc,
                    columns,
                ),
                3 => tile::<3>(
                    a_rows.as_ptr(),
                    pairs,
                    weights.as_ptr(),
                    c,
                    out.ldc,
                    columns,
                ),
                2 => tile::<2>(
                    a_rows.as_ptr(),
                    pairs,
                    weights.as_ptr(),
                    c,
                    out.ldc,
                    columns,
                ),
                _ => tile::<1>(
                    a_rows.as_ptr(),
                    pairs,
                    weights.as_ptr(),
                    c,
                    out.ldc,
                    columns,
                ),
            }
        }
    }
}

/// `ROWS` rows by one panel, written to `c`.
///
/// # Safety
/// The CPU has AVX-512F and AVX-512 BF16; `a` is readable for `ROWS` rows of `pairs` u32,
/// `weights` for `pairs * PANEL` u32, and `c` writable for `columns` (1 to `PANEL`) f32 of `ROWS`
/// rows `ldc` apart, no one else's.
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn tile<const ROWS: usize>(
    a: *const u32,
    pairs: usize,
    weights: *const u32,
    c: *mut f32,
    ldc: usize,
    columns: usize,
) {
    let mut low = [_mm512_setzero_ps(); ROWS];
    let mut high = [_mm512_setzero_ps(); ROWS];
    for pair in 0..pairs {
        // SAFETY: pair `pair < pairs` has its `PANEL` weights, two vectors, at `pair * PANEL`
        // (the caller's promise).
        let w = unsafe {
            let w = weights.add(pair * PANEL);
            [
                _mm512_loadu_si512(w.cast::<__m512i>()),
                _mm512_loadu_si512(w.add(16).cast::<__m512i>()),
            ]
        };
        let (w_low, w_high) = (bf16s(w[0]), bf16s(w[1]));
        for r in 0..ROWS {
            // SAFETY: row `r < ROWS`, pair `pair < pairs`: within `a` (the caller's promise).
            let pair_bits = unsafe { *a.add(r * pairs + pair) };
            let x = bf16s(_mm512_set1_epi32(pair_bits as i32));
            low[r] = _mm512_dpbf16_ps(low[r], x, w_low);
            high[r] = _mm512_dpbf16_ps(high[r], x, w_high);
        }
    }
    for r in 0..ROWS {
        // SAFETY: row `r < ROWS` has `columns` writable f32 at `r * ldc` (the caller's promise):
        // the first 16 or fewer here, the rest 16 further.
        unsafe {
            let row = c.add(r * ldc);
            store(row, low[r], columns.min(16));
            // Only formed when those columns exist: a pointer past the buffer is undefined
            // behaviour even unused (a last row of 16 or fewer columns ends the buffer).
            if columns > 16 {
                store(row.add(16), high[r], columns - 16);
            }
        }
    }
}

/// 512 bits as the 32 bf16 values `vdpbf16ps` reads them, unchanged.
#[target_feature(enable = "avx512f")]
#[inline]
fn bf16s(bits: __m512i) -> __m512bh {
    // SAFETY: both are 512 bits of plain data, every pattern a value.
    unsafe { std::mem::transmute::<__m512i, __m512bh>(bits) }
}

/// The first `columns` lanes of `value` (all 16 or fewer) to `at`.
///
/// # Safety
/// The CPU has AVX-512F; `at` is writable for `columns.min(16)` f32.
#[target_feature(enable = "avx512f")]
unsafe fn store(at: *mut f32, value: __m512, columns: usize) {
    if columns >= 16 {
        // SAFETY: 16 writable f32 at `at` (the caller's promise).
        unsafe { _mm512_storeu_ps(at, value) };
    } else if columns > 0 {
        // SAFETY: the mask writes only the first `columns` lanes, writable (the caller's
        // promise).
        unsafe { _mm512_mask_storeu_ps(at, ((1u32 << columns) - 1) as u16, value) };
    }
}
