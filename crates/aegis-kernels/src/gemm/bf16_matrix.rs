//! The bf16 weight layout the AVX-512 BF16, AMX and portable kernels read.

use super::tile::{elements, Source, PANEL};
use crate::bf16::{bf16_bits, pack_pairs};

/// The bf16 layout: panels of [`PANEL`] outputs; within a panel, for each pair of inputs
/// `(2k, 2k + 1)`, the panel's outputs' two weights as one u32 (bf16 low, bf16 high), the layout
/// AVX-512 BF16's `vdpbf16ps` reads. Padding (outputs past the last, an odd last input, pairs
/// past the inputs' for AMX's whole tiles) is zero.
#[derive(Clone)]
pub(super) struct Bf16Matrix {
    pub(super) inputs: usize,
    outputs: usize,
    pairs: usize,
    pub(super) data: Vec<u32>,
}

impl Bf16Matrix {
    pub(super) fn pack(outputs: usize, inputs: usize, pairs: usize, source: Source) -> Self {
        let panels = outputs.div_ceil(PANEL);
        let mut data = vec![0u32; elements(&[panels, pairs, PANEL])];
        let used_pairs = inputs.div_ceil(2);
        // Pairs past the inputs' and outputs past the last stay zero. Each source is read in
        // its own memory order (attention packs its keys and values per block of queries, so
        // this runs per message): a row of `[outputs, inputs]` is one output's pairs, a row of
        // `[inputs, outputs]` one input of a panel's outputs side by side.
        let mut row_pairs = vec![0u32; used_pairs];
        for (panel, block) in data.chunks_exact_mut(pairs * PANEL).enumerate() {
            let first = panel * PANEL;
            let width = PANEL.min(outputs - first);
            match source {
                Source::Rows(weight) => {
                    for lane in 0..width {
                        let o = first + lane;
                        pack_pairs(&weight[o * inputs..(o + 1) * inputs], &mut row_pairs);
                        for (pair, &value) in row_pairs.iter().enumerate() {
                            block[pair * PANEL + lane] = value;
                        }
                    }
                }
                Source::Columns(m) => {
                    for pair in 0..used_pairs {
                        let lanes = &mut block[pair * PANEL..pair * PANEL + width];
                        let low = &m[2 * pair * outputs + first..][..width];
                        if 2 * pair + 1 < inputs {
                            let high = &m[(2 * pair + 1) * outputs + first..][..width];
                            for ((lane, &low), &high) in lanes.iter_mut().zip(low).zip(high) {
                                *lane =
                                    u32::from(bf16_bits(low)) | (u32::from(bf16_bits(high)) << 16);
                            }
                        } else {
                            for (lane, &low) in lanes.iter_mut().zip(low) {
                                *lane = u32::from(bf16_bits(low));
                            }
                        }
                    }
                }
            }
        }
        Self {
            inputs,
            outputs,
            pairs,
            data,
        }
    }

    pub(super) fn pairs(&self) -> usize {
        self.pairs
    }

    pub(super) fn panels(&self) -> usize {
        self.outputs.div_ceil(PANEL)
    }

    /// One panel's packed weights.
    pub(super) fn panel(&self, panel: usize) -> &[u32] {
        let len = self.pairs() * PANEL;
        &self.data[panel * len..(panel + 1) * len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every u32 of the layout as its definition gives it, from either source, with padding.
    #[test]
    fn both_sources_pack_each_pair_of_each_output_where_the_layout_puts_it() {
        for (outputs, inputs) in [(1, 1), (33, 7), (64, 256), (70, 129)] {
            let values: Vec<f32> = (0..outputs * inputs)
                .map(|i| ((i * 7919) % 1009) as f32 / 97.0 - 5.0)
                .collect();
            let transposed: Vec<f32> = (0..inputs * outputs)
                .map(|k| values[(k % outputs) * inputs + k / outputs])
                .collect();
            for pairs in [inputs.div_ceil(2), inputs.div_ceil(2).next_multiple_of(16)] {
                let expected = |o: usize, pair: usize| -> u32 {
                    let at = |i: usize| {
                        if o < outputs && i < inputs {
                            u32::from(bf16_bits(values[o * inputs + i]))
                        } else {
                            0
                        }
                    };
                    at(2 * pair) | (at(2 * pair + 1) << 16)
                };
                for source in [Source::Rows(&values), Source::Columns(&transposed)] {
                    let matrix = Bf16Matrix::pack(outputs, inputs, pairs, source);
                    for panel in 0..matrix.panels() {
                        for pair in 0..pairs {
                            for lane in 0..PANEL {
                                assert_eq!(
                                    matrix.panel(panel)[pair * PANEL + lane],
                                    expected(panel * PANEL + lane, pair),
                                    "{outputs} x {inputs}, pairs {pairs}, panel {panel}, pair \
                                     {pair}, lane {lane}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}
