//! The int8 product on AMX-INT8 (Intel Xeon since Sapphire Rapids): `tdpbusd` multiplies a tile
//! of 16 rows by 64 unsigned bytes by one of 64 by 16 signed bytes into 16 × 16 i32 sums, 16,384
//! multiply-adds an instruction, 256 times `vpdpbusd`'s 64.
//!
//! The int8 layout's block of 64 inputs is one tile step: a weight tile is a block's 16 quad rows
//! of a panel for 16 outputs (128 bytes apart, as `tdpbusd` wants its second operand: an output's
//! four bytes side by side), and a tile of the input is 16 rows of one block's 16 quads. A block
//! of 32 rows by a panel of 32 outputs is four accumulator tiles. Each block's accumulators start
//! at the block's offsets (one row of 16 read 16 times, a stride of 0), so they end as the
//! block's integer sums, as the VNNI tiles' do; they then go through memory into f32 totals with
//! the portable tile's fused multiply-add, so all int8 kernels give the same bits.
//!
//! The per-block trip through memory is the price of a scale per block: four `tdpbusd` per block
//! against 32 rows × 32 outputs of conversion and multiply-add on AVX-512. Whether that beats
//! AVX-512 VNNI has not been measured (no CPU with AMX was at hand when it was written), so the
//! dispatch order keeps it after `avx512-vnni`: `AEGIS_CPU_KERNELS_OFF=avx512-vnni` selects it.
#![allow(unsafe_code)]

use super::amx::{Amx, Tiles, ACCUMULATORS, A_TILES, TILE_ROW_BYTES, W_TILES};
use super::int8::{add_block, Int8Matrix, QuantizedRows};
use super::tile::{Output, AMX_TILE as TILE, BLOCK_QUADS, PANEL};

/// Panels `panels` of the product on this CPU's tiles. `a` holds `rows` rounded up to a multiple
/// of [`TILE`] rows.
///
/// # Safety
/// `amx::int8_available()` said yes. (The sizes are checked in [`panels_on`].)
pub(super) unsafe fn panels(
    a: &QuantizedRows,
    rows: usize,
    matrix: &Int8Matrix,
    panels: std::ops::Range<usize>,
    out: Output,
) {
    // SAFETY: `int8_available()` said yes (the caller's promise).
    let mut tiles = unsafe { Amx::configure() };
    panels_on(&mut tiles, a, rows, matrix, panels, out);
}

/// [`panels`] on `tiles`.
pub(super) fn panels_on(
    tiles: &mut impl Tiles,
    a: &QuantizedRows,
    rows: usize,
    matrix: &Int8Matrix,
    panels: std::ops::Range<usize>,
    out: Output,
) {
    // The tiles load through raw pointers on the strength of this, in checked arithmetic.
    assert!(
        a.quads == matrix.quads()
            && a.blocks == matrix.blocks()
            && rows
                .checked_next_multiple_of(TILE)
                .and_then(|padded| padded.checked_mul(a.quads))
                .is_some_and(|n| a.data.len() >= n),
        "the AMX int8 layout pads rows to whole tiles"
    );
    let (a_stride, w_stride) = (a.quads * 4, PANEL * 4);
    let fast_sums = std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("fma");
    let mut sums = [0i32; TILE * TILE];
    // The f32 totals of a block of 32 rows by one panel.
    let mut totals = [0f32; 2 * TILE * PANEL];
    for panel in panels {
        let (weights, scales, offsets) = matrix.panel_parts(panel);
        let first_column = panel * PANEL;
        let columns = PANEL.min(out.columns - first_column);
        for start in (0..rows).step_by(2 * TILE) {
            let height = (rows - start).min(2 * TILE);
            // One row tile where 16 or fewer rows are left; its accumulators 2 and 3 go unused.
            let row_tiles = height.div_ceil(TILE);
            totals.fill(0.0);
            for block in 0..a.blocks {
                let at = block * PANEL;
                // SAFETY: the offsets' 16 i32 for each column half lie within the panel's
                // `blocks * PANEL`; the weight tiles are the block's 16 quad rows of this panel
                // (`quads * PANEL` u32); `a`'s tiles are rows `start` to `start + 16 *
                // row_tiles`, within the padded rows asserted above, and the block's 16 quads.
                unsafe {
                    for r in 0..row_tiles {
                        for half in 0..2 {
                            let from = offsets.as_ptr().add(at + TILE * half);
                            tiles.load(ACCUMULATORS[2 * r + half], from.cast(), 0);
                        }
                    }
                    for (half, &w) in W_TILES.iter().enumerate() {
                        let from = weights
                            .as_ptr()
                            .add(block * BLOCK_QUADS * PANEL + TILE * half);
                        tiles.load(w, from.cast(), w_stride);
                    }
                    for (r, &tile) in A_TILES.iter().enumerate().take(row_tiles) {
                        let row = start + TILE * r;
                        let from = a.data.as_ptr().add(row * a.quads + block * BLOCK_QUADS);
                        tiles.load(tile, from.cast(), a_stride);
                        for (half, &w) in W_TILES.iter().enumerate() {
                            tiles.dot_int8(ACCUMULATORS[2 * r + half], tile, w);
                        }
                    }
                }
                for r in 0..row_tiles {
                    for half in 0..2 {
                        // SAFETY: `sums` is 16 rows of 64 bytes, ours.
                        unsafe {
                            tiles.store(
                                ACCUMULATORS[2 * r + half],
                                sums.as_mut_ptr().cast(),
                                TILE_ROW_BYTES,
                            )
                        };
                        let block_scales = &scales[at + TILE * half..at + TILE * (half + 1)];
                        for m in 0..TILE.min(height - TILE * r) {
                            let row = TILE * r + m;
                            let row_scale = a.scales[(start + row) * a.blocks + block];
                            let total = &mut totals[row * PANEL + TILE * half..][..TILE];
                            let sum = &sums[m * TILE..(m + 1) * TILE];
                            if fast_sums {
                                // SAFETY: the CPU has just reported AVX-512F and FMA.
                                unsafe { add_sums_avx512(total, sum, block_scales, row_scale) };
                            } else {
                                add_sums(total, sum, block_scales, row_scale);
                            }
                        }
                    }
                }
            }
            for m in 0..height {
                // SAFETY: `matmul` checked that `c` holds `rows` rows of `ldc` with
                // `out.columns` valid columns; this writes row `start + m < rows`, this panel's
                // columns below `out.columns`, which no other thread writes.
                let c = unsafe {
                    std::slice::from_raw_parts_mut(
                        out.ptr().add((start + m) * out.ldc + first_column),
                        columns,
                    )
                };
                c.copy_from_slice(&totals[m * PANEL..m * PANEL + columns]);
            }
        }
    }
}

/// One row of 16 block sums into its totals, lane by lane as the portable tile adds them.
#[inline(always)]
fn add_sums(totals: &mut [f32], sums: &[i32], weight_scales: &[f32], row_scale: f32) {
    for ((total, &sum), &scale) in totals.iter_mut().zip(sums).zip(weight_scales) {
        *total = add_block(*total, sum, scale, row_scale);
    }
}

/// [`add_sums`] compiled for AVX-512F and FMA, so the 16 lanes are one vector each way (the same
/// operations, so the same bits).
///
/// # Safety
/// The CPU has AVX-512F and FMA.
#[target_feature(enable = "avx512f,fma")]
unsafe fn add_sums_avx512(totals: &mut [f32], sums: &[i32], weight_scales: &[f32], row_scale: f32) {
    add_sums(totals, sums, weight_scales, row_scale);
}

#[cfg(test)]
mod tests {
    use super::super::amx::Emulated;
    use super::super::int8::{portable_panel, quantize_rows};
    use super::super::tests::lcg;
    use super::*;

    #[test]
    fn the_amx_int8_loops_give_the_portable_tiles_bits_on_tiles_emulated_on_any_cpu() {
        // One and two row tiles, partial row tiles and panels, several blocks with a padded
        // last one, and the panels split in two threads' shares as `matmul` splits them.
        for (rows, outputs, inputs) in [
            (1, 16, 64),
            (16, 32, 64),
            (17, 33, 300),
            (33, 48, 770),
            (40, 96, 130),
            (101, 23, 41),
        ] {
            let mut seed = (rows * 31 + outputs * 7 + inputs) as u64;
            let a: Vec<f32> = (0..rows * inputs).map(|_| lcg(&mut seed)).collect();
            let w: Vec<f32> = (0..outputs * inputs).map(|_| lcg(&mut seed)).collect();
            let matrix = Int8Matrix::pack(outputs, inputs, |o, i| w[o * inputs + i]);
            let padded = rows.next_multiple_of(TILE);
            let quantized = quantize_rows(&a, rows, inputs, inputs, false, true, padded);
            let mut want = vec![0f32; rows * outputs];
            let want_out = Output::new(&mut want, outputs, outputs);
            for panel in 0..matrix.panels() {
                portable_panel(&quantized, rows, &matrix, panel, want_out);
            }
            // A wider output buffer: columns past `outputs` must stay untouched.
            let ldc = outputs + 3;
            let mut c = vec![7f32; rows * ldc];
            let out = Output::new(&mut c, ldc, outputs);
            let panels = matrix.panels();
            for share in [0..panels / 2, panels / 2..panels] {
                let mut tiles = Emulated::default();
                panels_on(&mut tiles, &quantized, rows, &matrix, share, out);
            }
            for r in 0..rows {
                assert_eq!(
                    &c[r * ldc..r * ldc + outputs],
                    &want[r * outputs..(r + 1) * outputs],
                    "{rows}x{outputs}x{inputs}, row {r}"
                );
                assert!(c[r * ldc + outputs..(r + 1) * ldc]
                    .iter()
                    .all(|&x| x == 7.0));
            }
        }
    }
}
