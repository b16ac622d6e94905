//! The int8 product on AVX-512 VNNI: a tile of up to [`INT8_TILE_ROWS`] rows by one [`PANEL`] of
//! outputs keeps 12 i32 block sums and 12 f32 totals; within a block each step broadcasts one
//! quad of a row's shifted input bytes and issues two `vpdpbusd` (64 multiply-adds each) against
//! the panel's two weight vectors; at the block's end each sum is scaled and added to its total
//! in one fused multiply-add, as the portable tile does it. The sums start at minus the block's
//! offsets, so no subtraction is left for the block's end: three vector operations a block for
//! every sixteen `vpdpbusd`.
#![allow(unsafe_code)]

use std::arch::x86_64::{
    __m512, __m512i, _mm512_cvtepi32_ps, _mm512_dpbusd_epi32, _mm512_fmadd_ps, _mm512_loadu_ps,
    _mm512_loadu_si512, _mm512_mask_storeu_ps, _mm512_mul_ps, _mm512_set1_epi32, _mm512_set1_ps,
    _mm512_setzero_ps, _mm512_storeu_ps,
};

use super::int8::{Int8Matrix, QuantizedRows};
use super::tile::{Output, PANEL};
use super::tile::{BLOCK_QUADS, INT8_TILE_ROWS};

pub(super) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512vnni")
}

/// What a tile reads: its rows' quads and block scales, and the panel's weights, block scales
/// and block offsets (shared with the 256-bit tiles).
#[derive(Clone, Copy)]
pub(super) struct TileInputs {
    pub(super) a: *const u32,
    pub(super) row_scales: *const f32,
    pub(super) quads: usize,
    pub(super) blocks: usize,
    pub(super) weights: *const u32,
    pub(super) scales: *const f32,
    pub(super) offsets: *const i32,
}

/// A tile: its inputs, where its first output goes, the output's row stride, and how many of
/// the panel's columns exist.
///
/// Calling one is unsafe, and sound where: the CPU has the features the tile is compiled for;
/// the inputs point at the tile's rows (as many as the tile's height) of `quads` quads and
/// `blocks` scales each, and at the panel's `quads * PANEL` weights and `blocks * PANEL` scales
/// and offsets, `quads` being `blocks * BLOCK_QUADS`; and the output is writable for `columns`
/// (1 to `PANEL`) f32 of each row, rows `ldc` apart, and no one else's.
pub(super) type Tile = unsafe fn(TileInputs, *mut f32, usize, usize);

/// The tile for each block height, 1 to [`INT8_TILE_ROWS`].
const TILES: [Tile; INT8_TILE_ROWS] = [
    tile::<1>, tile::<2>, tile::<3>, tile::<4>, tile::<5>, tile::<6>,
];

/// One panel of the product on 512-bit vectors.
///
/// # Safety
/// The CPU has AVX-512F, AVX-512 VNNI and FMA (what [`available`] checks, and `matmul` before
/// calling this, whatever kind its caller asked for).
pub(super) unsafe fn panel(
    a: &QuantizedRows,
    rows: usize,
    matrix: &Int8Matrix,
    panel: usize,
    out: Output,
) {
    // SAFETY: the CPU has the tiles' features (the caller's promise).
    unsafe { run_tiles(&TILES, a, rows, matrix, panel, out) }
}

/// One panel of the product, `tiles[h - 1]` computing each block of `h` rows.
///
/// # Safety
/// The CPU has what `tiles` are compiled for. (The sizes the tiles read are checked here.)
pub(super) unsafe fn run_tiles(
    tiles: &[Tile; INT8_TILE_ROWS],
    a: &QuantizedRows,
    rows: usize,
    matrix: &Int8Matrix,
    panel: usize,
    out: Output,
) {
    let first_column = panel * PANEL;
    let columns = PANEL.min(out.columns - first_column);
    let (weights, scales, offsets) = matrix.panel_parts(panel);
    // The tiles read through raw pointers on the strength of these: the input quantized in the
    // matrix's blocks, and the panel's parts as long as those blocks.
    assert!(a.blocks == matrix.blocks() && a.quads == matrix.quads());
    assert_eq!(weights.len(), a.quads * PANEL);
    assert_eq!(scales.len(), a.blocks * PANEL);
    assert_eq!(offsets.len(), scales.len());
    for start in (0..rows).step_by(INT8_TILE_ROWS) {
        let height = INT8_TILE_ROWS.min(rows - start);
        let a_rows = &a.data[start * a.quads..(start + height) * a.quads];
        let row_scales = &a.scales[start * a.blocks..(start + height) * a.blocks];
        let inputs = TileInputs {
            a: a_rows.as_ptr(),
            row_scales: row_scales.as_ptr(),
            quads: a.quads,
            blocks: a.blocks,
            weights: weights.as_ptr(),
            scales: scales.as_ptr(),
            offsets: offsets.as_ptr(),
        };
        // SAFETY: the CPU has the tiles' features (the caller's promise); the tile reads
        // `height` rows of `quads` quads and `blocks` scales, and the panel's `quads * PANEL`
        // weights and `blocks * PANEL` scales and offsets, all sized so above (the input and the
        // matrix are padded to the same whole blocks), and writes `columns` (1 to `PANEL`: the
        // panel exists) columns of `height` rows of `c` at row `start`, inside what `matmul`
        // checked and owned by this panel alone.
        unsafe {
            let c = out.ptr().add(start * out.ldc + first_column);
            tiles[height - 1](inputs, c, out.ldc, columns);
        }
    }
}

/// `ROWS` rows by one panel on 512-bit vectors.
///
/// # Safety
/// As a [`Tile`] is called: the CPU has AVX-512F, AVX-512 VNNI and FMA, and the inputs and
/// output hold what the tile reads and writes for `ROWS` rows.
#[target_feature(enable = "avx512f,avx512vnni,fma")]
unsafe fn tile<const ROWS: usize>(t: TileInputs, c: *mut f32, ldc: usize, columns: usize) {
    let mut total: [[__m512; 2]; ROWS] = [[_mm512_setzero_ps(); 2]; ROWS];
    for block in 0..t.blocks {
        let at = block * PANEL;
        // Each sum starts at minus its block's offset, so what it ends at is the product's.
        // SAFETY: block `block < blocks` has its `PANEL` offsets, two vectors, at `at` (the
        // caller's promise, as for the scales below).
        let start = unsafe {
            [
                _mm512_loadu_si512(t.offsets.add(at).cast::<__m512i>()),
                _mm512_loadu_si512(t.offsets.add(at + 16).cast::<__m512i>()),
            ]
        };
        let mut sums: [[__m512i; 2]; ROWS] = [start; ROWS];
        for quad in block * BLOCK_QUADS..(block + 1) * BLOCK_QUADS {
            // SAFETY: quad `quad < blocks * BLOCK_QUADS = quads` has its `PANEL` weights, two
            // vectors, at `quad * PANEL` (the caller's promise).
            let w = unsafe {
                let w = t.weights.add(quad * PANEL);
                [
                    _mm512_loadu_si512(w.cast::<__m512i>()),
                    _mm512_loadu_si512(w.add(16).cast::<__m512i>()),
                ]
            };
            for (r, sums) in sums.iter_mut().enumerate() {
                // SAFETY: row `r < ROWS`, quad `quad < quads`: within the tile's rows.
                let x = _mm512_set1_epi32(unsafe { *t.a.add(r * t.quads + quad) } as i32);
                sums[0] = _mm512_dpbusd_epi32(sums[0], x, w[0]);
                sums[1] = _mm512_dpbusd_epi32(sums[1], x, w[1]);
            }
        }
        // SAFETY: as the offsets above.
        let scales = unsafe {
            [
                _mm512_loadu_ps(t.scales.add(at)),
                _mm512_loadu_ps(t.scales.add(at + 16)),
            ]
        };
        for (r, (total, sums)) in total.iter_mut().zip(&sums).enumerate() {
            // SAFETY: row `r < ROWS`, block `block < blocks`: within the tile's rows' scales.
            let row_scale = _mm512_set1_ps(unsafe { *t.row_scales.add(r * t.blocks + block) });
            for half in 0..2 {
                total[half] = _mm512_fmadd_ps(
                    _mm512_cvtepi32_ps(sums[half]),
                    _mm512_mul_ps(scales[half], row_scale),
                    total[half],
                );
            }
        }
    }
    for (r, total) in total.iter().enumerate() {
        for (half, &value) in total.iter().enumerate() {
            let first = half * 16;
            // Only formed when those columns exist: a pointer past the buffer is undefined
            // behaviour even unused (a last row of 16 or fewer columns ends the buffer).
            if columns <= first {
                break;
            }
            let count = columns - first;
            // SAFETY: row `r < ROWS` has `columns` writable f32 at `r * ldc` (the caller's
            // promise), of which this writes `count.min(16)` from column `first < columns`.
            unsafe {
                let at = c.add(r * ldc + first);
                if count >= 16 {
                    _mm512_storeu_ps(at, value);
                } else {
                    _mm512_mask_storeu_ps(at, ((1u32 << count) - 1) as u16, value);
                }
            }
        }
    }
}
