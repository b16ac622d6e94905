//! The int8 layout, blocked as llama.cpp's Q8_0 is: weights and the product's input are cut into
//! blocks of [`BLOCK`] inputs, each block quantized symmetrically with its own f32 scale (the
//! weights once, the input row by row at each call); each block's products are summed exactly
//! in i32, then scaled back and added up in f32. This is the arithmetic of AVX-512 VNNI's
//! `vpdpbusd` (64 u8 × i8 multiply-adds an instruction, twice `vdpbf16ps`'s 32), which
//! multiplies an unsigned byte by a signed one: the input is stored shifted by 128
//! ([`ZERO_POINT`]) and each block's `128 · Σ w` is taken back off.
//!
//! Why blocks: with one scale per row a single large channel (Gemma's residual stream has a few)
//! set the step for all 768, and embeddings fell to cosine 0.9977 of the f32 path on a long text
//! of the encoder's tests, 0.9989 on a short one. Blocks of 64 on both sides keep every text
//! there at 0.9991 or above; blocks of 32 gain little more (0.9994) and cost a fifth of the
//! speed, since each block ends in three vector operations per sixteen `vpdpbusd` at 64 and
//! per eight at 32 (a 2-core Zen 4, one thread: 1.45 and 1.15 times bf16's rate). The portable tile here is the reference the VNNI tile is tested against: both sum the
//! same integers, then scale and add in the same order, so they give the same bits.

use rayon::prelude::*;

use super::tile::{elements, Output, PANEL};
pub(crate) use super::tile::{BLOCK, BLOCK_QUADS, QUAD, ZERO_POINT};

/// Weights as panels of [`PANEL`] outputs; within a panel, for each quad of inputs
/// `(4k .. 4k + 3)`, the panel's outputs' four i8 weights as one u32 (lowest byte first, the
/// layout `vpdpbusd` reads). Inputs are padded to whole blocks, outputs to whole panels, both
/// with zeros.
#[derive(Clone)]
pub(crate) struct Int8Matrix {
    pub(crate) inputs: usize,
    pub(crate) outputs: usize,
    data: Vec<u32>,
    /// Per panel, per block, per lane: what one unit of the block's integer sum is worth.
    scales: Vec<f32>,
    /// Per panel, per block, per lane: `-ZERO_POINT · Σ q` over the block, minus what the
    /// shifted input adds to its integer sum: where a block's sum starts.
    offsets: Vec<i32>,
}

impl Int8Matrix {
    pub(crate) fn pack(outputs: usize, inputs: usize, at: impl Fn(usize, usize) -> f32) -> Self {
        let blocks = inputs.div_ceil(BLOCK);
        let quads = blocks * BLOCK_QUADS;
        let panels = outputs.div_ceil(PANEL);
        let mut data = vec![0u32; elements(&[panels, quads, PANEL])];
        let mut scales = vec![0f32; elements(&[panels, blocks, PANEL])];
        let mut offsets = vec![0i32; elements(&[panels, blocks, PANEL])];
        let mut weights = vec![0f32; elements(&[blocks, BLOCK])];
        let mut bytes = [0i8; BLOCK];
        for o in 0..outputs {
            for (i, w) in weights.iter_mut().enumerate().take(inputs) {
                *w = at(o, i);
            }
            let (panel, lane) = (o / PANEL, o % PANEL);
            for (block, values) in weights.chunks_exact(BLOCK).enumerate() {
                let scale = quantize_weights(values, &mut bytes);
                let at = (panel * blocks + block) * PANEL + lane;
                scales[at] = scale;
                offsets[at] = -ZERO_POINT * bytes.iter().map(|&q| i32::from(q)).sum::<i32>();
                for (k, quad) in bytes.chunks_exact(QUAD).enumerate() {
                    let word = u32::from_le_bytes([
                        quad[0] as u8,
                        quad[1] as u8,
                        quad[2] as u8,
                        quad[3] as u8,
                    ]);
                    data[(panel * quads + block * BLOCK_QUADS + k) * PANEL + lane] = word;
                }
            }
        }
        Self {
            inputs,
            outputs,
            data,
            scales,
            offsets,
        }
    }

    pub(crate) fn blocks(&self) -> usize {
        self.inputs.div_ceil(BLOCK)
    }

    pub(crate) fn quads(&self) -> usize {
        self.blocks() * BLOCK_QUADS
    }

    pub(crate) fn panels(&self) -> usize {
        self.outputs.div_ceil(PANEL)
    }

    /// One panel's packed weights.
    pub(crate) fn panel(&self, panel: usize) -> &[u32] {
        let len = self.quads() * PANEL;
        &self.data[panel * len..(panel + 1) * len]
    }

    /// One panel's weights, scales and offsets, as a tile reads them.
    pub(crate) fn panel_parts(&self, panel: usize) -> (&[u32], &[f32], &[i32]) {
        (
            self.panel(panel),
            self.panel_scales(panel),
            self.panel_offsets(panel),
        )
    }

    /// One panel's scales, block by block, [`PANEL`] each.
    pub(crate) fn panel_scales(&self, panel: usize) -> &[f32] {
        let len = self.blocks() * PANEL;
        &self.scales[panel * len..(panel + 1) * len]
    }

    /// One panel's offsets, block by block, [`PANEL`] each.
    pub(crate) fn panel_offsets(&self, panel: usize) -> &[i32] {
        let len = self.blocks() * PANEL;
        &self.offsets[panel * len..(panel + 1) * len]
    }
}

/// One block of weights to i8, symmetric; returns its scale (zero for an all-zero block, whose
/// integers are zero whatever the scale).
fn quantize_weights(values: &[f32], out: &mut [i8]) -> f32 {
    let largest = values.iter().fold(0f32, |m, &v| m.max(v.abs()));
    let inverse = if largest > 0.0 { 127.0 / largest } else { 0.0 };
    for (q, &v) in out.iter_mut().zip(values) {
        *q = (v * inverse).round().clamp(-127.0, 127.0) as i8;
    }
    largest / 127.0
}

/// The product's input quantized row by row and block by block: four shifted bytes per u32,
/// and each block's scale.
pub(crate) struct QuantizedRows {
    pub(crate) data: Vec<u32>,
    pub(crate) quads: usize,
    pub(crate) blocks: usize,
    pub(crate) scales: Vec<f32>,
}

fn quantize_row_body(row: &[f32], out: &mut [u8], scales: &mut [f32]) {
    for ((values, bytes), scale) in row.chunks(BLOCK).zip(out.chunks_mut(BLOCK)).zip(scales) {
        let largest = values.iter().fold(0f32, |m, &v| m.max(v.abs()));
        let inverse = if largest > 0.0 { 127.0 / largest } else { 0.0 };
        // Shifted into 1..=255 and rounded half up by truncation (the shifted value is
        // positive): a conversion to i32 every CPU vectorises, where `round` is a library call
        // without SSE4.1 and a float's saturating cast to u8 is not vectorised.
        for (q, &v) in bytes.iter_mut().zip(values) {
            *q = ((v * inverse + (ZERO_POINT as f32 + 0.5)) as i32).clamp(1, 255) as u8;
        }
        *scale = largest / 127.0;
    }
}

/// One row to shifted bytes (`out` as long as `row`), a scale per block into `scales`; `wide`
/// allows 512-bit vectors (the 512-bit tile's products), else at most 256-bit ones.
fn quantize_row(row: &[f32], out: &mut [u8], scales: &mut [f32], wide: bool) {
    #[cfg(target_arch = "x86_64")]
    if super::quantize_x86::quantize_row(row, out, scales, wide) {
        return;
    }
    let _ = wide;
    quantize_row_body(row, out, scales);
}

/// `a`'s rows quantized, then zero rows (zero point, zero scales) up to `padded_rows` for tiles
/// of whole rows; `parallel` spreads them over rayon's threads (each row is independent, so the
/// bytes are the same either way); `wide` as [`quantize_row`] has it (the bytes are the same
/// either way too).
pub(crate) fn quantize_rows(
    a: &[f32],
    rows: usize,
    lda: usize,
    inputs: usize,
    parallel: bool,
    wide: bool,
    padded_rows: usize,
) -> QuantizedRows {
    let blocks = inputs.div_ceil(BLOCK);
    let quads = blocks * BLOCK_QUADS;
    // Padding inputs meet zero weights: any byte will do; the zero point keeps them honest.
    let mut bytes = vec![ZERO_POINT as u8; elements(&[rows.max(padded_rows), quads, QUAD])];
    let mut scales = vec![0f32; elements(&[rows.max(padded_rows), blocks])];
    let quantize = |(row, (out, scales)): (usize, (&mut [u8], &mut [f32]))| {
        quantize_row(
            &a[row * lda..row * lda + inputs],
            &mut out[..inputs],
            scales,
            wide,
        );
    };
    let width = quads * QUAD;
    let (real_bytes, real_scales) = (&mut bytes[..rows * width], &mut scales[..rows * blocks]);
    if parallel {
        real_bytes
            .par_chunks_exact_mut(width)
            .zip(real_scales.par_chunks_exact_mut(blocks))
            .enumerate()
            .for_each(quantize);
    } else {
        real_bytes
            .chunks_exact_mut(width)
            .zip(real_scales.chunks_exact_mut(blocks))
            .enumerate()
            .for_each(quantize);
    }
    let data = bytes
        .chunks_exact(QUAD)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    QuantizedRows {
        data,
        quads,
        blocks,
        scales,
    }
}

/// An output's running total after one more block, from the block's integer sum (started at
/// its offset): the same operations in the same order as the VNNI tile's, one fused
/// multiply-add, so both give the same bits.
#[inline(always)]
pub(crate) fn add_block(total: f32, sum: i32, weight_scale: f32, row_scale: f32) -> f32 {
    (sum as f32).mul_add(weight_scale * row_scale, total)
}

/// The product in plain Rust: the reference for the VNNI tile, and what runs where a matrix
/// packed for it meets a CPU without VNNI.
pub(crate) fn portable_panel(
    a: &QuantizedRows,
    rows: usize,
    matrix: &Int8Matrix,
    panel: usize,
    out: Output,
) {
    let first_column = panel * PANEL;
    let columns = PANEL.min(out.columns - first_column);
    let (weights, scales, offsets) = matrix.panel_parts(panel);
    for row in 0..rows {
        let x = &a.data[row * a.quads..(row + 1) * a.quads];
        let mut total = [0f32; PANEL];
        for block in 0..a.blocks {
            let mut sums: [i32; PANEL] = offsets[block * PANEL..(block + 1) * PANEL]
                .try_into()
                .unwrap_or([0; PANEL]);
            for quad in block * BLOCK_QUADS..(block + 1) * BLOCK_QUADS {
                let x = x[quad].to_le_bytes();
                let w = &weights[quad * PANEL..(quad + 1) * PANEL];
                for (sum, &w) in sums.iter_mut().zip(w) {
                    let w = w.to_le_bytes();
                    for k in 0..QUAD {
                        *sum += i32::from(x[k]) * i32::from(w[k] as i8);
                    }
                }
            }
            let row_scale = a.scales[row * a.blocks + block];
            for lane in 0..PANEL {
                let at = block * PANEL + lane;
                total[lane] = add_block(total[lane], sums[lane], scales[at], row_scale);
            }
        }
        // SAFETY: `matmul` checked that `c` holds `rows` rows of `ldc` with `out.columns`
        // valid columns; this writes row `row`, columns of this panel below `out.columns`,
        // which no other thread writes.
        #[allow(unsafe_code)]
        let c = unsafe {
            std::slice::from_raw_parts_mut(out.ptr().add(row * out.ldc + first_column), columns)
        };
        c.copy_from_slice(&total[..columns]);
    }
}

/// The product in f64 over the quantized operands, block by block: what the int8 tiles must reach
/// to within f32 rounding.
#[cfg(test)]
pub(super) fn reference(
    a: &[f32],
    rows: usize,
    w: &[f32],
    outputs: usize,
    inputs: usize,
) -> Vec<f64> {
    let x = quantize_rows(a, rows, inputs, inputs, false, true, rows);
    let m = Int8Matrix::pack(outputs, inputs, |o, i| w[o * inputs + i]);
    let byte = |words: &[u32], i: usize| words[i / QUAD].to_le_bytes()[i % QUAD];
    let mut c = vec![0.0; rows * outputs];
    for r in 0..rows {
        let row = &x.data[r * x.quads..(r + 1) * x.quads];
        for o in 0..outputs {
            let (panel, lane) = (o / PANEL, o % PANEL);
            let weights = m.panel(panel);
            c[r * outputs + o] = (0..x.blocks)
                .map(|block| {
                    let sum: i32 = (block * BLOCK..(block + 1) * BLOCK)
                        .map(|i| {
                            let q_a = i32::from(byte(row, i)) - ZERO_POINT;
                            let word = weights[(i / QUAD) * PANEL + lane];
                            q_a * i32::from(word.to_le_bytes()[i % QUAD] as i8)
                        })
                        .sum();
                    f64::from(sum)
                        * f64::from(m.panel_scales(panel)[block * PANEL + lane])
                        * f64::from(x.scales[r * x.blocks + block])
                })
                .sum();
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_quantizes_block_by_block_around_the_zero_point_with_its_largest_value_at_the_edge() {
        let mut row = vec![0f32; BLOCK + 3];
        row[..5].copy_from_slice(&[0.5, -1.0, 0.0, 0.25, 1.0 / 127.0]);
        row[BLOCK..].copy_from_slice(&[2.0, 0.0, -1.0]);
        let mut out = vec![0u8; row.len()];
        let mut scales = [0f32; 2];
        quantize_row(&row, &mut out, &mut scales, true);
        assert_eq!(scales, [1.0 / 127.0, 2.0 / 127.0]);
        // 0.5·127 = 63.5 rounds half up to 64.
        assert_eq!(out[..5], [128 + 64, 1, 128, 128 + 32, 129]);
        // -63.5 rounds half up too, to -63.
        assert_eq!(out[BLOCK..], [255, 128, 128 - 63]);
        let mut zeros = [9u8; 3];
        let mut scale = [7.0f32];
        quantize_row(&[0.0; 3], &mut zeros, &mut scale, false);
        assert_eq!((zeros, scale), ([128; 3], [0.0]));
    }

    #[test]
    fn the_vectorised_quantization_gives_the_portable_bytes_and_scales() {
        let mut seed = 11u32;
        for len in [1usize, 15, 64, 130, 768] {
            let row: Vec<f32> = (0..len)
                .map(|i| {
                    seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    // A few large channels, as the residual stream has.
                    let v = (seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5;
                    if i % 37 == 5 {
                        v * 40.0
                    } else {
                        v
                    }
                })
                .collect();
            let blocks = len.div_ceil(BLOCK);
            let (mut want_bytes, mut want_scales) = (vec![0u8; len], vec![0f32; blocks]);
            quantize_row_body(&row, &mut want_bytes, &mut want_scales);
            // 512-bit vectors where the CPU has them, and 256-bit ones.
            for wide in [true, false] {
                let (mut bytes, mut scales) = (vec![0u8; len], vec![0f32; blocks]);
                quantize_row(&row, &mut bytes, &mut scales, wide);
                assert_eq!(
                    (&bytes, &scales),
                    (&want_bytes, &want_scales),
                    "length {len}, wide {wide}"
                );
            }
        }
    }

    #[test]
    fn weights_keep_a_scale_and_offset_per_output_and_block() {
        let w = [1.0, -0.5, 0.25, 0.0, 2.0];
        let mut inputs = vec![0f32; 2 * BLOCK];
        inputs[..5].copy_from_slice(&w);
        inputs[BLOCK] = -3.0;
        let matrix = Int8Matrix::pack(2, inputs.len(), |o, i| if o == 0 { inputs[i] } else { 0.0 });
        let (scales, offsets) = (matrix.panel_scales(0), matrix.panel_offsets(0));
        assert_eq!((scales[0], scales[PANEL]), (2.0 / 127.0, 3.0 / 127.0));
        assert_eq!(scales[1], 0.0);
        // 63.5 and -31.75 round away from zero and to nearest: 64, -32, 16, 0, 127.
        assert_eq!(offsets[0], -ZERO_POINT * (64 - 32 + 16 + 127));
        assert_eq!(offsets[PANEL], -ZERO_POINT * -127);
        assert_eq!(offsets[1], 0);
        assert_eq!(matrix.panel(0)[0].to_le_bytes(), [64, (-32i8) as u8, 16, 0]);
        assert_eq!(matrix.panel(0)[PANEL].to_le_bytes(), [127, 0, 0, 0]);
        assert_eq!(
            matrix.panel(0)[BLOCK_QUADS * PANEL].to_le_bytes(),
            [(-127i8) as u8, 0, 0, 0]
        );
    }
}
