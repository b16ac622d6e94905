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
    // The AVX-512 and AMX kernels read these rows through raw pointers.
    assert!(pairs >= inputs.div_ceil(2) && padded_rows >= rows);
    let mut data = vec![0u32; elements(&[padded_rows, pairs])];
    for (row, out) in data.chunks_exact_mut(pairs).take(rows).enumerate() {
        pack_pairs(
            &a[row * lda..row * lda + inputs],
            &mut out[..inputs.div_ceil(2)],
        );
    }
    PackedRows { data, pairs }
}

/// Elements from the first of `rows` rows' start (`rows` at least 1) to the last one's end, rows
/// `stride` apart and `width` wide; `None` where that overflows `usize`. The size checks that
/// unsafe code relies on use it, so a stride near `usize::MAX` cannot wrap into a small span.
pub(crate) fn span(rows: usize, stride: usize, width: usize) -> Option<usize> {
    (rows - 1).checked_mul(stride)?.checked_add(width)
}

/// The length of a buffer of `dimensions`, their product; a panic where it overflows `usize`.
/// Every packed buffer is allocated through it, so a size too large to hold panics here rather
/// than wrapping to a short buffer whose bounds, computed the same way, would wrap to match.
pub(crate) fn elements(dimensions: &[usize]) -> usize {
    dimensions
        .iter()
        .try_fold(1usize, |product, &d| product.checked_mul(d))
        .unwrap_or_else(|| panic!("a buffer of {dimensions:?} elements overflows usize"))
}

/// Where a tile writes: `c` as a raw pointer so threads can share it. Each thread writes only its
/// own panels' columns, so no two threads ever touch the same element.
///
/// The tiles write through the pointer on the strength of what `matmul` checked before making
/// one: `c` holds the product's rows `ldc` apart with `columns` written in each, and outlives
/// every tile (rayon's scope joins the threads before `matmul` returns). Tests that make one
/// directly keep the same promise.
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
// SAFETY: as for `Send`: sharing one between threads gives each only its own columns to write.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_and_sizes_that_overflow_are_caught_not_wrapped() {
        assert_eq!(span(3, 4, 2), Some(10));
        assert_eq!(span(1, usize::MAX, 5), Some(5));
        assert_eq!(span(2, usize::MAX, 2), None);
        assert_eq!(span(3, usize::MAX / 2 + 1, 2), None);
        assert_eq!(elements(&[3, 0, usize::MAX]), 0);
        assert_eq!(elements(&[2, 16, 5]), 160);
        let message = crate::gemm::tests::panic_message(|| {
            elements(&[usize::MAX / 32 + 1, 2, 16]);
        });
        assert!(message.ends_with("overflows usize"), "{message}");
    }
}
