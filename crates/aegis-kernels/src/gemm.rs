//! `c = a · Wᵀ` with `W` packed once for the kernel that runs it: in bfloat16 pairs, `a` rounded
//! to bfloat16 per call and products summed in f32 (AMX tiles, AVX-512 BF16, or the same
//! arithmetic in portable code), or in f32 throughout where the CPU has no bf16 dot product
//! (AVX2 with FMA), or in int8 with a scale per block of inputs (AVX-512 VNNI), a weight format
//! chosen rather than detected, since it rounds far more than bf16 does.
//! Columns are split between threads, so each thread streams its own share of the weights once
//! and writes disjoint columns of `c`.

#[cfg(target_arch = "x86_64")]
mod amx;
#[cfg(target_arch = "x86_64")]
mod amx_int8;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod bf16_matrix;
mod f32_panels;
mod int8;
mod kind;
mod portable;
#[cfg(target_arch = "x86_64")]
mod quantize_x86;
mod tile;
#[cfg(target_arch = "x86_64")]
mod vnni;
#[cfg(target_arch = "x86_64")]
mod vnni256;

use bf16_matrix::Bf16Matrix;
use f32_panels::F32Matrix;
use int8::Int8Matrix;
pub use kind::{KernelKind, KERNELS_OFF_ENV};
pub use tile::BLOCK as INT8_BLOCK;
use tile::{pack_rows, span, Output, Source, AMX_TILE};

/// Below this many multiply-adds a product runs on the calling thread: splitting costs more.
const PARALLEL_MIN_MACS: usize = 1 << 20;

/// A weight matrix packed for one [`KernelKind`], which [`matmul`] then runs.
#[derive(Clone)]
pub struct Matrix {
    kind: KernelKind,
    outputs: usize,
    inputs: usize,
    layout: Layout,
}

#[derive(Clone)]
enum Layout {
    Bf16(Bf16Matrix),
    F32(F32Matrix),
    Int8(Int8Matrix),
}

impl std::fmt::Debug for Matrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Matrix({} x {}, {})",
            self.outputs,
            self.inputs,
            self.kind.name()
        )
    }
}

impl Matrix {
    /// From a linear layer's weight, `[outputs, inputs]` row-major (`y = x · Wᵀ`).
    pub fn from_rows(kind: KernelKind, weight: &[f32], outputs: usize, inputs: usize) -> Self {
        // Checked, as every size here: a product that wraps would let a short slice through.
        assert!(
            outputs.checked_mul(inputs) == Some(weight.len()),
            "weight of {} values is not {outputs} x {inputs}",
            weight.len()
        );
        Self::pack(kind, outputs, inputs, Source::Rows(weight))
    }

    /// From `m`, `[inputs, outputs]` row-major (`y = x · m`): attention's values.
    pub fn from_columns(kind: KernelKind, m: &[f32], inputs: usize, outputs: usize) -> Self {
        assert!(
            outputs.checked_mul(inputs) == Some(m.len()),
            "matrix of {} values is not {inputs} x {outputs}",
            m.len()
        );
        Self::pack(kind, outputs, inputs, Source::Columns(m))
    }

    /// Several linear layers reading the same input, their outputs side by side (q, k and v in
    /// one product): `[sum of outputs, inputs]`.
    pub fn stacked(kind: KernelKind, weights: &[(&[f32], usize)], inputs: usize) -> Self {
        let mut rows = Vec::new();
        for (weight, outputs) in weights {
            assert!(
                outputs.checked_mul(inputs) == Some(weight.len()),
                "weight of {} values is not {outputs} x {inputs}",
                weight.len()
            );
            rows.extend_from_slice(weight);
        }
        let outputs = weights
            .iter()
            .try_fold(0usize, |sum, (_, o)| sum.checked_add(*o))
            .unwrap_or_else(|| panic!("the stacked layers' outputs overflow usize"));
        Self::from_rows(kind, &rows, outputs, inputs)
    }

    fn pack(kind: KernelKind, outputs: usize, inputs: usize, source: Source) -> Self {
        // One closure per source, so the element loops of the layouts read by index alone.
        match source {
            Source::Rows(weight) => {
                Self::pack_layout(kind, outputs, inputs, source, |o, i| weight[o * inputs + i])
            }
            Source::Columns(m) => {
                Self::pack_layout(kind, outputs, inputs, source, |o, i| m[i * outputs + o])
            }
        }
    }

    /// The layouts that read `source` element by element through `at` (packed once, at load),
    /// and the bf16 one, which reads it in memory order (also packed per message, by attention).
    fn pack_layout(
        kind: KernelKind,
        outputs: usize,
        inputs: usize,
        source: Source,
        at: impl Fn(usize, usize) -> f32,
    ) -> Self {
        let layout = match kind {
            KernelKind::Avx2Fma => Layout::F32(F32Matrix::pack(outputs, inputs, at)),
            KernelKind::AmxInt8 | KernelKind::Avx512Vnni | KernelKind::AvxVnni => {
                Layout::Int8(Int8Matrix::pack(outputs, inputs, at))
            }
            KernelKind::AmxBf16 => Layout::Bf16(Bf16Matrix::pack(
                outputs,
                inputs,
                inputs.div_ceil(2).next_multiple_of(AMX_TILE),
                source,
            )),
            KernelKind::Avx512Bf16 | KernelKind::Portable => Layout::Bf16(Bf16Matrix::pack(
                outputs,
                inputs,
                inputs.div_ceil(2),
                source,
            )),
        };
        Self {
            kind,
            outputs,
            inputs,
            layout,
        }
    }

    /// The kind it was packed for.
    pub fn kind(&self) -> KernelKind {
        self.kind
    }

    pub fn outputs(&self) -> usize {
        self.outputs
    }

    pub fn inputs(&self) -> usize {
        self.inputs
    }
}

/// `c[r, o] = Σ_i a[r, i] · W[o, i]` for `rows` rows of `a` (row stride `lda`) into `c` (row
/// stride `ldc`), only the matrix's `outputs` columns written, by the kernel `w` was packed for.
/// `parallel` lets it use rayon's threads when the product is large enough to repay them.
///
/// # Panics
/// Where `a` does not hold `rows` rows of the matrix's inputs `lda` apart, or `c` as many of its
/// outputs `ldc` apart (a span too large for `usize` holds nothing).
pub fn matmul(
    a: &[f32],
    rows: usize,
    lda: usize,
    w: &Matrix,
    c: &mut [f32],
    ldc: usize,
    parallel: bool,
) {
    if rows == 0 {
        return;
    }
    // The kernels write through a raw pointer on the strength of these two checks, so their
    // arithmetic is checked too: a stride near `usize::MAX` must not wrap into a small span.
    assert!(
        lda >= w.inputs && span(rows, lda, w.inputs).is_some_and(|n| a.len() >= n),
        "a is too short for {rows} rows of {} inputs {lda} apart",
        w.inputs
    );
    assert!(
        ldc >= w.outputs && span(rows, ldc, w.outputs).is_some_and(|n| c.len() >= n),
        "c is too short for {rows} rows of {} outputs {ldc} apart",
        w.outputs
    );
    let out = Output::new(c, ldc, w.outputs);
    let macs = rows.saturating_mul(w.outputs).saturating_mul(w.inputs);
    let parallel = parallel && macs >= PARALLEL_MIN_MACS;
    match &w.layout {
        Layout::Bf16(matrix) => {
            // A kind is a request, not a promise: safe code can pack for `Avx512Bf16` on any
            // CPU, so the features are checked here, where the unsafe kernel is chosen (the
            // check is cached).
            // AMX's layout (pairs padded to whole tiles) is read by the others where AMX is not
            // granted: the padding is zeros on both sides.
            let tiles = w.kind == KernelKind::AmxBf16 && w.kind.available();
            let fast = KernelKind::Avx512Bf16.available()
                && matches!(w.kind, KernelKind::Avx512Bf16 | KernelKind::AmxBf16);
            let padded_rows = if tiles {
                rows.next_multiple_of(AMX_TILE)
            } else {
                rows
            };
            let packed = pack_rows(a, rows, lda, matrix.inputs, matrix.pairs(), padded_rows);
            split_panels(matrix.panels(), parallel, |panels| {
                #[cfg(target_arch = "x86_64")]
                if tiles {
                    // SAFETY: `tiles` only where `available()` said AMX-BF16 is granted.
                    #[allow(unsafe_code)]
                    unsafe {
                        amx::panels(&packed, rows, &matrix.data, panels, out)
                    };
                    return;
                }
                for panel in panels {
                    #[cfg(target_arch = "x86_64")]
                    if fast {
                        // SAFETY: `fast` only where `available()` said AVX-512 BF16.
                        #[allow(unsafe_code)]
                        unsafe {
                            avx512::panel(&packed, rows, matrix.panel(panel), panel, out)
                        };
                        continue;
                    }
                    let _ = (tiles, fast);
                    portable::panel(&packed, rows, matrix.panel(panel), panel, out);
                }
            });
        }
        Layout::F32(matrix) => {
            // Only `Avx2Fma` packs this layout; without AVX2 its plain tile runs.
            let fast = w.kind.available();
            split_panels(matrix.panels(), parallel, |panels| {
                // SAFETY: `fast` only where `available()` said AVX2 and FMA.
                #[allow(unsafe_code)]
                unsafe {
                    f32_panels::run_panels(fast, a, rows, lda, matrix, panels, out)
                };
            });
        }
        Layout::Int8(matrix) => {
            // Every int8 kind packs this layout and they give the same bits: AMX tiles where
            // asked for and granted, else the 512-bit tile where asked for (AMX's request falls
            // back to it) and present, else the 256-bit one where present, else the portable
            // tile.
            let tiles = w.kind == KernelKind::AmxInt8 && w.kind.available();
            let wide = !tiles
                && matches!(w.kind, KernelKind::AmxInt8 | KernelKind::Avx512Vnni)
                && KernelKind::Avx512Vnni.available();
            let narrow = !tiles && !wide && KernelKind::AvxVnni.available();
            let padded_rows = if tiles {
                rows.next_multiple_of(AMX_TILE)
            } else {
                rows
            };
            let quantized = int8::quantize_rows(
                a,
                rows,
                lda,
                matrix.inputs,
                parallel,
                tiles || wide,
                padded_rows,
            );
            split_panels(matrix.panels(), parallel, |panels| {
                #[cfg(target_arch = "x86_64")]
                if tiles {
                    // SAFETY: `tiles` only where `available()` said AMX-INT8 is granted.
                    #[allow(unsafe_code)]
                    unsafe {
                        amx_int8::panels(&quantized, rows, matrix, panels, out)
                    };
                    return;
                }
                for panel in panels {
                    #[cfg(target_arch = "x86_64")]
                    if wide {
                        // SAFETY: `wide` only where `available()` said AVX-512 VNNI.
                        #[allow(unsafe_code)]
                        unsafe {
                            vnni::panel(&quantized, rows, matrix, panel, out)
                        };
                        continue;
                    }
                    #[cfg(target_arch = "x86_64")]
                    if narrow {
                        vnni256::panel(&quantized, rows, matrix, panel, out);
                        continue;
                    }
                    let _ = (tiles, wide, narrow);
                    int8::portable_panel(&quantized, rows, matrix, panel, out);
                }
            });
        }
    }
}

/// Runs `run` over `0..panels`, split in one contiguous share per thread when `parallel`.
fn split_panels(panels: usize, parallel: bool, run: impl Fn(std::ops::Range<usize>) + Sync) {
    let threads = rayon::current_num_threads().min(panels);
    if !parallel || threads < 2 {
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
mod tests;
