//! `c = a · Wᵀ` with `W` packed once in bfloat16 and `a` rounded to bfloat16 per call; products
//! summed in f32. Columns are split between threads, so each thread streams its own share of the
//! weights once and writes disjoint columns of `c`.

#[cfg(target_arch = "x86_64")]
mod avx512;
mod portable;
mod tile;

use crate::bf16::bf16_bits;
use tile::{pack_rows, Output, PANEL};

/// Below this many multiply-adds a product runs on the calling thread: splitting costs more.
const PARALLEL_MIN_MACS: usize = 1 << 20;

/// A weight matrix in the kernel's layout: panels of [`PANEL`] outputs; within a panel, for each
/// pair of inputs `(2k, 2k + 1)`, the panel's outputs' two weights as one u32 (bf16 low, bf16
/// high), the layout AVX-512 BF16's `vdpbf16ps` reads. Padding (outputs past the last, an odd
/// last input) is zero.
#[derive(Clone)]
pub struct Bf16Matrix {
    outputs: usize,
    inputs: usize,
    data: Vec<u32>,
}

impl std::fmt::Debug for Bf16Matrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Bf16Matrix({} x {})", self.outputs, self.inputs)
    }
}

impl Bf16Matrix {
    /// From a linear layer's weight, `[outputs, inputs]` row-major (`y = x · Wᵀ`).
    pub fn from_rows(weight: &[f32], outputs: usize, inputs: usize) -> Self {
        assert_eq!(
            weight.len(),
            outputs * inputs,
            "weight is not {outputs} x {inputs}"
        );
        Self::pack(outputs, inputs, |o, i| weight[o * inputs + i])
    }

    /// From `m`, `[inputs, outputs]` row-major (`y = x · m`): attention's values.
    pub fn from_columns(m: &[f32], inputs: usize, outputs: usize) -> Self {
        assert_eq!(
            m.len(),
            outputs * inputs,
            "matrix is not {inputs} x {outputs}"
        );
        Self::pack(outputs, inputs, |o, i| m[i * outputs + o])
    }

    /// Several linear layers reading the same input, their outputs side by side (q, k and v in
    /// one product): `[sum of outputs, inputs]`.
    pub fn stacked(weights: &[(&[f32], usize)], inputs: usize) -> Self {
        let mut rows = Vec::new();
        for (weight, outputs) in weights {
            assert_eq!(
                weight.len(),
                outputs * inputs,
                "weight is not {outputs} x {inputs}"
            );
            rows.extend_from_slice(weight);
        }
        let outputs = weights.iter().map(|(_, o)| o).sum();
        Self::from_rows(&rows, outputs, inputs)
    }

    fn pack(outputs: usize, inputs: usize, at: impl Fn(usize, usize) -> f32) -> Self {
        let pairs = inputs.div_ceil(2);
        let panels = outputs.div_ceil(PANEL);
        let mut data = vec![0u32; panels * pairs * PANEL];
        for panel in 0..panels {
            for pair in 0..pairs {
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
            outputs,
            inputs,
            data,
        }
    }

    pub fn outputs(&self) -> usize {
        self.outputs
    }

    pub fn inputs(&self) -> usize {
        self.inputs
    }

    fn pairs(&self) -> usize {
        self.inputs.div_ceil(2)
    }

    fn panels(&self) -> usize {
        self.outputs.div_ceil(PANEL)
    }

    /// One panel's packed weights.
    fn panel(&self, panel: usize) -> &[u32] {
        let len = self.pairs() * PANEL;
        &self.data[panel * len..(panel + 1) * len]
    }
}

/// Which code runs the product: chosen once per process from what the CPU reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelKind {
    /// `vdpbf16ps` on 512-bit vectors.
    Avx512Bf16,
    /// Plain Rust the compiler vectorises: the same roundings, far slower (a fourteenth of
    /// AVX-512 BF16 on the dev machine, a quarter of candle's f32 GEMM), so the encoder only
    /// runs on it when asked (`EncoderArithmetic::Kernels`); it is the reference the fast kind is
    /// tested against.
    Portable,
}

impl KernelKind {
    /// Every kind this CPU runs, fastest first (`Portable` always last).
    pub fn supported() -> Vec<Self> {
        match Self::detect() {
            Self::Portable => vec![Self::Portable],
            fast => vec![fast, Self::Portable],
        }
    }

    /// The fastest kind this CPU runs.
    pub fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        if avx512::available() {
            return Self::Avx512Bf16;
        }
        Self::Portable
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Avx512Bf16 => "avx512-bf16",
            Self::Portable => "portable",
        }
    }
}

/// `c[r, o] = Σ_i a[r, i] · W[o, i]` for `rows` rows of `a` (row stride `lda`) into `c` (row
/// stride `ldc`), only the matrix's `outputs` columns written. `parallel` lets it use rayon's
/// threads when the product is large enough to repay them.
#[allow(clippy::too_many_arguments)]
pub fn matmul(
    kind: KernelKind,
    a: &[f32],
    rows: usize,
    lda: usize,
    w: &Bf16Matrix,
    c: &mut [f32],
    ldc: usize,
    parallel: bool,
) {
    if rows == 0 {
        return;
    }
    assert!(
        lda >= w.inputs && a.len() >= (rows - 1) * lda + w.inputs,
        "a is too short"
    );
    assert!(
        ldc >= w.outputs && c.len() >= (rows - 1) * ldc + w.outputs,
        "c is too short"
    );
    // A kind is a request, not a promise: safe code can name `Avx512Bf16` on any CPU, so the
    // features are checked here, where the unsafe kernel is chosen (the check is cached).
    #[cfg(target_arch = "x86_64")]
    let kind = match kind {
        KernelKind::Avx512Bf16 if !avx512::available() => KernelKind::Portable,
        other => other,
    };
    let packed = pack_rows(a, rows, lda, w.inputs);
    let out = Output::new(c, ldc, w.outputs);
    let panels = w.panels();
    let run = |range: std::ops::Range<usize>| {
        for panel in range {
            match kind {
                #[cfg(target_arch = "x86_64")]
                KernelKind::Avx512Bf16 => avx512::panel(&packed, rows, w.panel(panel), panel, out),
                _ => portable::panel(&packed, rows, w.panel(panel), panel, out),
            }
        }
    };
    let threads = rayon::current_num_threads().min(panels);
    if !parallel || threads < 2 || rows * w.outputs * w.inputs < PARALLEL_MIN_MACS {
        run(0..panels);
        return;
    }
    let share = panels.div_ceil(threads);
    rayon::scope(|scope| {
        for start in (0..panels).step_by(share) {
            let run = &run;
            scope.spawn(move |_| run(start..(start + share).min(panels)));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bf16::bf16_to_f32;

    fn lcg(seed: &mut u64) -> f32 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((*seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    /// The product in f64 over the bf16-rounded operands: what either kernel must reach to
    /// within f32 summation error.
    fn reference(a: &[f32], rows: usize, w: &[f32], outputs: usize, inputs: usize) -> Vec<f64> {
        let r = |x: f32| f64::from(bf16_to_f32(bf16_bits(x)));
        let mut c = vec![0.0; rows * outputs];
        for i in 0..rows {
            for o in 0..outputs {
                c[i * outputs + o] = (0..inputs)
                    .map(|k| r(a[i * inputs + k]) * r(w[o * inputs + k]))
                    .sum();
            }
        }
        c
    }

    fn check(kind: KernelKind, rows: usize, outputs: usize, inputs: usize, parallel: bool) {
        let mut seed = (rows * 31 + outputs * 7 + inputs) as u64;
        let a: Vec<f32> = (0..rows * inputs).map(|_| lcg(&mut seed)).collect();
        let w: Vec<f32> = (0..outputs * inputs).map(|_| lcg(&mut seed)).collect();
        let matrix = Bf16Matrix::from_rows(&w, outputs, inputs);
        // A wider output buffer: columns past `outputs` must stay untouched.
        let ldc = outputs + 3;
        let mut c = vec![7.0f32; rows * ldc];
        matmul(kind, &a, rows, inputs, &matrix, &mut c, ldc, parallel);
        let expected = reference(&a, rows, &w, outputs, inputs);
        for i in 0..rows {
            for o in 0..outputs {
                let (got, want) = (f64::from(c[i * ldc + o]), expected[i * outputs + o]);
                assert!(
                    (got - want).abs() <= 1e-5 * inputs as f64,
                    "{kind:?} {rows}x{outputs}x{inputs} at ({i},{o}): {got} vs {want}"
                );
            }
            assert!(
                c[i * ldc + outputs..(i + 1) * ldc]
                    .iter()
                    .all(|&x| x == 7.0),
                "padding written"
            );
        }
    }

    #[test]
    fn both_kernels_compute_the_product_of_the_rounded_operands() {
        for kind in KernelKind::supported() {
            for (rows, outputs, inputs) in [
                (1, 32, 2),
                (3, 5, 7),
                (9, 70, 33),
                (17, 64, 256),
                (40, 96, 130),
            ] {
                check(kind, rows, outputs, inputs, false);
                check(kind, rows, outputs, inputs, true);
            }
            // Large enough to split between threads.
            check(kind, 64, 160, 512, true);
        }
    }

    #[test]
    fn any_kind_asked_for_is_safe_on_this_cpu_and_narrow_outputs_end_the_buffer_exactly() {
        // `Avx512Bf16` named on a CPU without it runs the portable kernel; with it, a product of
        // 16 or fewer columns whose last row ends `c` forms no pointer past it.
        for kind in [KernelKind::Avx512Bf16, KernelKind::Portable] {
            for (rows, outputs) in [(1, 16), (2, 8), (3, 1)] {
                let inputs = 4;
                let w: Vec<f32> = (0..outputs * inputs).map(|x| x as f32 * 0.25).collect();
                let a: Vec<f32> = (0..rows * inputs).map(|x| 1.0 - x as f32 * 0.5).collect();
                let matrix = Bf16Matrix::from_rows(&w, outputs, inputs);
                let mut c = vec![0.0f32; rows * outputs];
                matmul(kind, &a, rows, inputs, &matrix, &mut c, outputs, false);
                let mut want = vec![0.0f32; rows * outputs];
                matmul(
                    KernelKind::Portable,
                    &a,
                    rows,
                    inputs,
                    &matrix,
                    &mut want,
                    outputs,
                    false,
                );
                assert_eq!(c, want, "{kind:?} {rows}x{outputs}");
            }
        }
    }

    #[test]
    fn columns_layout_is_the_transpose_of_rows() {
        let m: Vec<f32> = (0..12).map(|x| x as f32).collect(); // [3 inputs, 4 outputs]
        let by_columns = Bf16Matrix::from_columns(&m, 3, 4);
        let transposed: Vec<f32> = (0..4)
            .flat_map(|o| (0..3).map(move |i| (i * 4 + o) as f32))
            .collect();
        assert_eq!(
            by_columns.data,
            Bf16Matrix::from_rows(&transposed, 4, 3).data
        );
    }
}
