//! The bf16 weight layout the AVX-512 BF16, AMX and portable kernels read.

use super::tile::PANEL;
use crate::bf16::bf16_bits;

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
    pub(super) fn pack(
        outputs: usize,
        inputs: usize,
        pairs: usize,
        at: impl Fn(usize, usize) -> f32,
    ) -> Self {
        let panels = outputs.div_ceil(PANEL);
        let mut data = vec![0u32; panels * pairs * PANEL];
        for panel in 0..panels {
            // Pairs past the inputs' stay zero.
            for pair in 0..inputs.div_ceil(2) {
                let base = (panel * pairs + pair) * PANEL;
                for lane in 0..PANEL {
                    let o = panel * PANEL + lane;
                    if o >= outputs {
                        break;
                    }
                    let (i, j) = (2 * pair, 2 * pair + 1);
                    let low = u32::from(bf16_bits(at(o, i)));
                    let high = if j < inputs {
                        u32::from(bf16_bits(at(o, j)))
                    } else {
                        0
                    };
                    data[base + lane] = low | (high << 16);
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
