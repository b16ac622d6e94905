//! `c = a · Wᵀ` in f32 for CPUs without a bfloat16 dot product. Rounding to bf16 buys nothing
//! there (an AVX2 CPU has to widen each bf16 back to f32 before its FMA, and that work cost the
//! bf16 layout a third of candle's f32 rate), so the weights stay f32, packed once in panels of
//! [`PANEL`] outputs, input by input: a tile streams one panel's 16 weights per input and reads
//! `a` in place.

#[cfg(target_arch = "x86_64")]
mod avx2;
mod tile;

use super::tile::{elements, Output};
use tile::{Tile, PANEL, TILE_ROWS};

/// Rows of `a` a thread runs its panels over before moving on: 96 rows of the widest input
/// (1,152) are 442 KB, which stays in a core's L2 while every panel passes over them, where a
/// 1,000-token `a` would be fetched from L3 once per panel.
const ROW_BLOCK: usize = 96;

/// A weight matrix as panels of [`PANEL`] outputs; within a panel, for each input, the panel's 16
/// weights. Outputs past the last are zero.
#[derive(Clone)]
pub(crate) struct F32Matrix {
    inputs: usize,
    panels: usize,
    data: Vec<f32>,
}

impl F32Matrix {
    pub(crate) fn pack(outputs: usize, inputs: usize, at: impl Fn(usize, usize) -> f32) -> Self {
        let panels = outputs.div_ceil(PANEL);
        let mut data = vec![0f32; elements(&[panels, inputs, PANEL])];
        for (panel, block) in data.chunks_exact_mut(inputs * PANEL).enumerate() {
            for (input, lanes) in block.chunks_exact_mut(PANEL).enumerate() {
                for (lane, value) in lanes.iter_mut().enumerate() {
                    let o = panel * PANEL + lane;
                    if o < outputs {
                        *value = at(o, input);
                    }
                }
            }
        }
        Self {
            inputs,
            panels,
            data,
        }
    }

    pub(crate) fn panels(&self) -> usize {
        self.panels
    }

    fn panel(&self, panel: usize) -> &[f32] {
        let len = self.inputs * PANEL;
        &self.data[panel * len..(panel + 1) * len]
    }
}

/// Whether this CPU runs the AVX2 tile.
pub(crate) fn avx2_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        avx2::available()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `panels` of `w` over every row of `a` (row stride `lda`) into `out`, on AVX2 when `fast`, else
/// in plain Rust.
///
/// # Safety
/// Where `fast`, the CPU has AVX2 and FMA.
#[allow(unsafe_code)]
pub(crate) unsafe fn run_panels(
    fast: bool,
    a: &[f32],
    rows: usize,
    lda: usize,
    w: &F32Matrix,
    panels: std::ops::Range<usize>,
    out: Output,
) {
    for block in (0..rows).step_by(ROW_BLOCK) {
        let block_rows = ROW_BLOCK.min(rows - block);
        for panel in panels.clone() {
            let columns = PANEL.min(out.columns - panel * PANEL);
            for start in (block..block + block_rows).step_by(TILE_ROWS) {
                let tile_rows = TILE_ROWS.min(block + block_rows - start);
                let tile = Tile {
                    a: &a[start * lda..],
                    lda,
                    inputs: w.inputs,
                    weights: w.panel(panel),
                    rows: tile_rows,
                    row: start,
                    first_column: panel * PANEL,
                    columns,
                };
                #[cfg(target_arch = "x86_64")]
                if fast {
                    // SAFETY: `fast` only where the CPU has AVX2 and FMA (the caller's promise).
                    unsafe { avx2::tile(&tile, out) };
                    continue;
                }
                let _ = fast;
                portable_tile(&tile, out);
            }
        }
    }
}

fn portable_tile(tile: &Tile, out: Output) {
    let mut sums = [[0f32; PANEL]; TILE_ROWS];
    for (input, weights) in tile.weights.chunks_exact(PANEL).enumerate() {
        for (r, sums) in sums.iter_mut().enumerate().take(tile.rows) {
            let x = tile.a[r * tile.lda + input];
            for (sum, &w) in sums.iter_mut().zip(weights) {
                *sum += x * w;
            }
        }
    }
    tile.write(&sums, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panels_hold_each_outputs_weights_input_by_input_and_zero_past_the_last() {
        // 18 outputs of 3 inputs: two panels, the second with 2 real outputs.
        let m = F32Matrix::pack(18, 3, |o, i| (o * 10 + i) as f32);
        assert_eq!(m.panels(), 2);
        assert_eq!(m.panel(0)[..3], [0.0, 10.0, 20.0]);
        assert_eq!(m.panel(0)[PANEL], 1.0);
        assert_eq!(m.panel(1)[..3], [160.0, 170.0, 0.0]);
        assert!(m.panel(1)[2..PANEL].iter().all(|&w| w == 0.0));
    }

    #[test]
    fn the_plain_tile_and_the_avx2_tile_reach_the_f64_product() {
        // The plain tile runs only where AVX2 is missing, so it is checked here directly.
        let (rows, outputs, inputs, lda, ldc) = (101, 37, 29, 31, 40);
        let a: Vec<f32> = (0..rows * lda)
            .map(|x| ((x * 7) % 13) as f32 / 6.5 - 1.0)
            .collect();
        let w: Vec<f32> = (0..outputs * inputs)
            .map(|x| ((x * 5) % 11) as f32 / 5.5 - 1.0)
            .collect();
        let matrix = F32Matrix::pack(outputs, inputs, |o, i| w[o * inputs + i]);
        let mut ways = vec![false];
        if avx2_available() {
            ways.push(true);
        }
        for fast in ways {
            let mut c = vec![9f32; rows * ldc];
            let out = Output::new(&mut c, ldc, outputs);
            // SAFETY: `fast` only where `avx2_available()` said yes.
            #[allow(unsafe_code)]
            unsafe {
                run_panels(fast, &a, rows, lda, &matrix, 0..matrix.panels(), out)
            };
            for r in 0..rows {
                for o in 0..outputs {
                    let want: f64 = (0..inputs)
                        .map(|i| f64::from(a[r * lda + i]) * f64::from(w[o * inputs + i]))
                        .sum();
                    let got = f64::from(c[r * ldc + o]);
                    assert!(
                        (got - want).abs() < 1e-4,
                        "fast {fast} ({r},{o}): {got} vs {want}"
                    );
                }
                assert!(c[r * ldc + outputs..(r + 1) * ldc]
                    .iter()
                    .all(|&x| x == 9.0));
            }
        }
    }

    /// The AVX2 tile's loads rely on its own size checks, which hold in release builds too and
    /// are checked arithmetic: rows `usize::MAX` apart overrun `a` rather than wrap into it.
    #[cfg(target_arch = "x86_64")]
    #[test]
    #[allow(unsafe_code)]
    fn the_avx2_tile_refuses_rows_that_overrun_a_before_loading_them() {
        if !avx2_available() {
            return;
        }
        let matrix = F32Matrix::pack(2, 2, |_, _| 1.0);
        let a = [1.0f32; 4];
        let mut c = [7.0f32; 4];
        let out = Output::new(&mut c, 2, 2);
        let tile = Tile {
            a: &a,
            lda: usize::MAX,
            inputs: 2,
            weights: matrix.panel(0),
            rows: 2,
            row: 0,
            first_column: 0,
            columns: 2,
        };
        let message = crate::gemm::tests::panic_message(|| {
            // SAFETY: the CPU has AVX2 and FMA, checked above.
            unsafe { avx2::tile(&tile, out) }
        });
        assert_eq!(message, "the tile's rows overrun a");
        assert_eq!(c, [7.0; 4]);
    }
}
