//! What a panel kernel reads and writes, shared by every kernel of `gemm`: the panel and tile
//! sizes, `a` packed as bf16 pairs, and the output the threads share.

use crate::bf16::pack_pairs;

/// Outputs per panel: two 16-lane vectors of f32 accumulators.
pub(crate) const PANEL: usize = 32;
/// Rows of `a` a tile computes at once (16 accumulators, 2 weight vectors, 1 broadcast).
pub(crate) const TILE_ROWS: usize = 8;
/// Rows of an AMX tile, and input pairs in one of its rows: the AMX layout pads both to it.
pub(crate) const AMX_TILE: usize = 16;

/// The int8 layout's unsigned byte that stands for an input of zero.
pub(crate) const ZERO_POINT: i32 = 128;
/// Inputs per 32-bit lane of `vpdpbusd`.
pub(crate) const QUAD: usize = 4;
/// Inputs that share a scale, on each side of the int8 product (see `int8`).
pub const BLOCK: usize = 64;
/// Quads per block.
pub(crate) const BLOCK_QUADS: usize = BLOCK / QUAD;
/// Rows of the input an int8 tile computes at once: 12 i32 sums and 12 f32 totals in registers.
pub(crate) const INT8_TILE_ROWS: usize = 6;

/// `a` rounded to bf16 pairs, row by row.
pub(crate) struct PackedRows {
    pub(crate) data: Vec<u32>,
    pub(crate) pairs: usize,
}

/// `rows` rows of `inputs` from `a`, in `pairs` pairs a row (at least `inputs / 2` rounded up;
/// past that, zeros), then zero rows up to `padded_rows`.
pub(crate) fn pack_rows(
    a: &[f32],
    rows: usize,
    lda: usize,
    inputs: usize,
    pairs: usize,
    padded_rows: usize,
) -> PackedRows {
    assert!(pairs >= inputs.div_ceil(2) && padded_rows >= rows);
    let mut data = vec![0u32; padded_rows * pairs];
    for (row, out) in data.chunks_exact_mut(pairs).take(rows).enumerate() {
        pack_pairs(
            &a[row * lda..row * lda + inputs],
            &mut out[..inputs.div_ceil(2)],
        );
    }
    PackedRows { data, pairs }
}

/// Where a tile writes: `c` as a raw pointer so threads can share it. Each thread writes only its
/// own panels' columns, so no two threads ever touch the same element.
#[derive(Clone, Copy)]
pub(crate) struct Output {
    ptr: *mut f32,
    pub(crate) ldc: usize,
    pub(crate) columns: usize,
}

// SAFETY: see `Output`: the threads of one `matmul` write disjoint elements, and `matmul` does not
// return before they finish (rayon's scope joins them).
#[allow(unsafe_code)]
unsafe impl Send for Output {}
#[allow(unsafe_code)]
unsafe impl Sync for Output {}

impl Output {
    /// `c`, of rows `ldc` apart with `columns` written in each.
    pub(crate) fn new(c: &mut [f32], ldc: usize, columns: usize) -> Self {
        Self {
            ptr: c.as_mut_ptr(),
            ldc,
            columns,
        }
    }

    pub(crate) fn ptr(self) -> *mut f32 {
        self.ptr
    }
}

/// A matrix's values as given: `[outputs, inputs]` (a linear layer's weight) or `[inputs,
/// outputs]` (attention's values), row-major.
#[derive(Clone, Copy)]
pub(crate) enum Source<'a> {
    Rows(&'a [f32]),
    Columns(&'a [f32]),
}
