//! The int8 product on 256-bit `vpdpbusd` (32 multiply-adds an instruction), for the CPUs most
//! reviewers' laptops have: Intel Core since Alder Lake has AVX-VNNI and no AVX-512. It reads the
//! layout the AVX-512 tile reads and does the same arithmetic lane by lane, so the two and the
//! portable tile give the same bits. With 16 vector registers (AVX-512 has 32), a tile takes half
//! a panel (16 outputs, two vectors) at a time: 12 i32 sums, 2 weight vectors and a broadcast
//! stay in registers, and the f32 totals, touched once a block, may live on the stack.
//!
//! The instruction comes in two encodings with the same semantics: VEX (AVX-VNNI) and EVEX
//! (AVX-512 VNNI with AVX-512VL). Both tiles are built from one body, so an AVX-512 machine runs
//! the same loop (tests, and the bench beside the other kinds) where no AVX-VNNI CPU is at hand.
#![allow(unsafe_code)]

use std::arch::x86_64::{
    __m256, __m256i, _mm256_cmpgt_epi32, _mm256_cvtepi32_ps, _mm256_dpbusd_avx_epi32,
    _mm256_dpbusd_epi32, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_loadu_si256, _mm256_maskstore_ps,
    _mm256_mul_ps, _mm256_set1_epi32, _mm256_set1_ps, _mm256_setr_epi32, _mm256_setzero_ps,
    _mm256_storeu_ps,
};

use super::int8::{Int8Matrix, QuantizedRows};
use super::tile::{Output, PANEL};
use super::tile::{BLOCK_QUADS, INT8_TILE_ROWS};
use super::vnni::{run_tiles, Tile, TileInputs};

/// Outputs in one 256-bit vector of i32 or f32.
const LANES: usize = 8;
/// Outputs a tile covers in one pass: half a panel.
const HALF: usize = PANEL / 2;

/// The VEX encoding (AVX-VNNI).
fn vex_available() -> bool {
    std::arch::is_x86_feature_detected!("avxvnni")
        && std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma")
}

/// The EVEX encoding of the same instruction on 256 bits.
fn evex_available() -> bool {
    std::arch::is_x86_feature_detected!("avx512vnni")
        && std::arch::is_x86_feature_detected!("avx512vl")
        && std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma")
}

pub(super) fn available() -> bool {
    vex_available() || evex_available()
}

/// Builds a tile function from one body for an encoding's target features and intrinsic.
macro_rules! tile_for {
    ($name:ident, $features:literal, $dpbusd:ident) => {
        /// Up to `ROWS` rows by one panel: each half panel's block sums start at minus the
        /// block's offsets, and at the block's end are scaled and added to the totals in one
        /// fused multiply-add, as the portable tile does it.
        ///
        /// # Safety
        /// As a [`Tile`] is called: the CPU has the features the encoding is compiled for, and
        /// the inputs and output hold what the tile reads and writes for `ROWS` rows.
        #[target_feature(enable = $features)]
        unsafe fn $name<const ROWS: usize>(t: TileInputs, c: *mut f32, ldc: usize, columns: usize) {
            for first in [0, HALF] {
                if columns <= first {
                    break;
                }
                let mut total: [[__m256; 2]; ROWS] = [[_mm256_setzero_ps(); 2]; ROWS];
                for block in 0..t.blocks {
                    let at = block * PANEL + first;
                    // SAFETY: block `block < blocks` has its `PANEL` offsets at `block * PANEL`
                    // (the caller's promise, as for the scales below); this half's two vectors
                    // start `first` (0 or `HALF`) into them.
                    let start = unsafe {
                        [
                            _mm256_loadu_si256(t.offsets.add(at).cast::<__m256i>()),
                            _mm256_loadu_si256(t.offsets.add(at + LANES).cast::<__m256i>()),
                        ]
                    };
                    let mut sums: [[__m256i; 2]; ROWS] = [start; ROWS];
                    for quad in block * BLOCK_QUADS..(block + 1) * BLOCK_QUADS {
                        // SAFETY: quad `quad < blocks * BLOCK_QUADS = quads` has its `PANEL`
                        // weights at `quad * PANEL` (the caller's promise); this half's two
                        // vectors start `first` into them.
                        let w = unsafe {
                            let w = t.weights.add(quad * PANEL + first);
                            [
                                _mm256_loadu_si256(w.cast::<__m256i>()),
                                _mm256_loadu_si256(w.add(LANES).cast::<__m256i>()),
                            ]
                        };
                        for (r, sums) in sums.iter_mut().enumerate() {
                            // SAFETY: row `r < ROWS`, quad `quad < quads`: within the tile's
                            // rows.
                            let quad_bytes = unsafe { *t.a.add(r * t.quads + quad) };
                            let x = _mm256_set1_epi32(quad_bytes as i32);
                            sums[0] = $dpbusd(sums[0], x, w[0]);
                            sums[1] = $dpbusd(sums[1], x, w[1]);
                        }
                    }
                    // SAFETY: as the offsets above.
                    let scales = unsafe {
                        [
                            _mm256_loadu_ps(t.scales.add(at)),
                            _mm256_loadu_ps(t.scales.add(at + LANES)),
                        ]
                    };
                    for (r, (total, sums)) in total.iter_mut().zip(&sums).enumerate() {
                        // SAFETY: row `r < ROWS`, block `block < blocks`: within the tile's
                        // rows' scales.
                        let scale = unsafe { *t.row_scales.add(r * t.blocks + block) };
                        let row_scale = _mm256_set1_ps(scale);
                        for half in 0..2 {
                            total[half] = _mm256_fmadd_ps(
                                _mm256_cvtepi32_ps(sums[half]),
                                _mm256_mul_ps(scales[half], row_scale),
                                total[half],
                            );
                        }
                    }
                }
                for (r, total) in total.iter().enumerate() {
                    for (k, &value) in total.iter().enumerate() {
                        let column = first + k * LANES;
                        // Only formed when those columns exist: a pointer past the buffer is
                        // undefined behaviour even unused.
                        if columns <= column {
                            break;
                        }
                        let count = columns - column;
                        // SAFETY: row `r < ROWS` has `columns` writable f32 at `r * ldc` (the
                        // caller's promise), of which this writes `count.min(LANES)` from column
                        // `column < columns`.
                        unsafe {
                            let at = c.add(r * ldc + column);
                            if count >= LANES {
                                _mm256_storeu_ps(at, value);
                            } else {
                                let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
                                let mask =
                                    _mm256_cmpgt_epi32(_mm256_set1_epi32(count as i32), lane);
                                _mm256_maskstore_ps(at, mask, value);
                            }
                        }
                    }
                }
            }
        }
    };
}

tile_for!(vex_tile, "avx2,fma,avxvnni", _mm256_dpbusd_avx_epi32);
tile_for!(
    evex_tile,
    "avx2,fma,avx512f,avx512vl,avx512vnni",
    _mm256_dpbusd_epi32
);

/// The tile for each block height, 1 to [`INT8_TILE_ROWS`], per encoding.
const VEX_TILES: [Tile; INT8_TILE_ROWS] = [
    vex_tile::<1>,
    vex_tile::<2>,
    vex_tile::<3>,
    vex_tile::<4>,
    vex_tile::<5>,
    vex_tile::<6>,
];
const EVEX_TILES: [Tile; INT8_TILE_ROWS] = [
    evex_tile::<1>,
    evex_tile::<2>,
    evex_tile::<3>,
    evex_tile::<4>,
    evex_tile::<5>,
    evex_tile::<6>,
];

/// The encoding this CPU runs, AVX-VNNI's first (where a CPU has both, they are one instruction).
fn tiles() -> Option<&'static [Tile; INT8_TILE_ROWS]> {
    if vex_available() {
        Some(&VEX_TILES)
    } else if evex_available() {
        Some(&EVEX_TILES)
    } else {
        None
    }
}

pub(super) fn panel(
    a: &QuantizedRows,
    rows: usize,
    matrix: &Int8Matrix,
    panel: usize,
    out: Output,
) {
    let Some(tiles) = tiles() else {
        // `matmul` checks `available()` first; this keeps the function safe on its own.
        super::int8::portable_panel(a, rows, matrix, panel, out);
        return;
    };
    // SAFETY: `tiles()` returned this encoding's tiles only where the CPU has its features.
    unsafe { run_tiles(tiles, a, rows, matrix, panel, out) }
}
