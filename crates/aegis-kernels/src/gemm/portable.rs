//! The product in plain Rust, rounding as `vdpbf16ps` does: each bf16 product is exact in f32,
//! the odd element's product is added before the even one's.

use super::tile::{Output, PackedRows, PANEL, TILE_ROWS};
use crate::bf16::bf16_to_f32;

pub(super) fn panel(a: &PackedRows, rows: usize, weights: &[u32], panel: usize, out: Output) {
    let first_column = panel * PANEL;
    let columns = PANEL.min(out.columns - first_column);
    let mut acc = [[0f32; PANEL]; TILE_ROWS];
    for start in (0..rows).step_by(TILE_ROWS) {
        let block = TILE_ROWS.min(rows - start);
        for row in &mut acc[..block] {
            *row = [0.0; PANEL];
        }
        for (pair, w) in weights.chunks_exact(PANEL).enumerate() {
            for (r, acc) in acc[..block].iter_mut().enumerate() {
                let x = a.data[(start + r) * a.pairs + pair];
                let (x_low, x_high) = (bf16_to_f32(x as u16), bf16_to_f32((x >> 16) as u16));
                for (sum, &w) in acc.iter_mut().zip(w) {
                    *sum += x_high * bf16_to_f32((w >> 16) as u16);
                    *sum += x_low * bf16_to_f32(w as u16);
                }
            }
        }
        for (r, acc) in acc[..block].iter().enumerate() {
            let at = (start + r) * out.ldc + first_column;
            // SAFETY: `matmul` checked that `c` holds `rows` rows of `ldc` with `out.columns`
            // valid columns; this writes row `start + r`, columns of this panel below
            // `out.columns`, which no other thread writes.
            #[allow(unsafe_code)]
            let row = unsafe { std::slice::from_raw_parts_mut(out.ptr().add(at), columns) };
            row.copy_from_slice(&acc[..columns]);
        }
    }
}
