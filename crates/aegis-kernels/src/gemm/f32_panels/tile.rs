//! What the f32 tiles read and write: the panel and tile sizes and one tile's operands, shared by
//! the AVX2 tile and the plain one.

use crate::gemm::tile::Output;

/// Outputs per panel: two 8-lane vectors.
pub(crate) const PANEL: usize = 16;
/// Rows a tile computes at once: 12 accumulators, 2 weight vectors and 1 broadcast fill 15 of
/// AVX2's 16 vector registers.
pub(crate) const TILE_ROWS: usize = 6;

/// One tile's operands: `rows` rows of `a` from its start, one panel of weights, and where the
/// result goes in the output.
pub(crate) struct Tile<'a> {
    pub(crate) a: &'a [f32],
    pub(crate) lda: usize,
    pub(crate) inputs: usize,
    pub(crate) weights: &'a [f32],
    pub(crate) rows: usize,
    pub(crate) row: usize,
    pub(crate) first_column: usize,
    pub(crate) columns: usize,
}

impl Tile<'_> {
    /// Writes `sums` (the tile's rows, [`PANEL`] each) to the output's rows and columns.
    pub(crate) fn write(&self, sums: &[[f32; PANEL]], out: Output) {
        for (r, sums) in sums.iter().enumerate().take(self.rows) {
            let at = (self.row + r) * out.ldc + self.first_column;
            // SAFETY: `matmul` checked that `c` holds every row of `ldc` with `out.columns` valid
            // columns; this writes row `self.row + r` at this panel's columns below
            // `out.columns`, which no other thread writes.
            #[allow(unsafe_code)]
            let row = unsafe { std::slice::from_raw_parts_mut(out.ptr().add(at), self.columns) };
            row.copy_from_slice(&sums[..self.columns]);
        }
    }
}
