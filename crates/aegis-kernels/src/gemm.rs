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
mod tests {
    use super::*;
    use crate::bf16::{bf16_bits, bf16_to_f32};

    /// Regression: the size checks computed `(rows - 1) * ldc + outputs` unchecked, so in a
    /// release build a huge stride wrapped to a small span and the kernels wrote out of bounds.
    #[test]
    #[should_panic(expected = "c is too short")]
    fn an_output_stride_that_overflows_panics_instead_of_writing() {
        let matrix = Matrix::from_rows(KernelKind::Portable, &[1.0; 4], 2, 2);
        let mut c = vec![0.0f32; 4];
        matmul(&[1.0; 4], 2, 2, &matrix, &mut c, usize::MAX, false);
    }

    #[test]
    #[should_panic(expected = "a is too short")]
    fn an_input_stride_that_overflows_panics_instead_of_reading() {
        let matrix = Matrix::from_rows(KernelKind::Portable, &[1.0; 4], 2, 2);
        let mut c = vec![0.0f32; 4];
        matmul(&[1.0; 4], 2, usize::MAX, &matrix, &mut c, 2, false);
    }

    /// The message `run` panics with; a test failure where it returns.
    pub(super) fn panic_message(run: impl FnOnce()) -> String {
        let payload = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run))
            .expect_err("expected a panic");
        match payload.downcast::<String>() {
            Ok(message) => *message,
            Err(payload) => payload
                .downcast_ref::<&str>()
                .map_or_else(String::new, |m| (*m).to_owned()),
        }
    }

    #[test]
    fn sizes_that_overflow_or_fall_short_panic_on_every_kind_before_anything_is_written() {
        // Strides whose span wraps past `usize::MAX` to a few elements (1 · MAX + 2 and 2 · 2^63
        // + 2 on 64 bits), and buffers one element short; any kind packs and runs on any CPU.
        let half = usize::MAX / 2 + 1;
        for kind in KernelKind::ALL {
            let matrix = Matrix::from_rows(kind, &[1.0; 4], 2, 2);
            for (rows, lda, ldc, c_len, expected) in [
                (2, 2, usize::MAX, 4, "c is too short"),
                (3, 2, half, 6, "c is too short"),
                (2, usize::MAX, 2, 4, "a is too short"),
                (3, half, 2, 6, "a is too short"),
                (2, 2, 2, 3, "c is too short"),
                (2, 3, 2, 4, "a is too short"),
            ] {
                let a = vec![1.0f32; 2 * rows];
                let mut c = vec![7.0f32; c_len];
                let message = panic_message(|| matmul(&a, rows, lda, &matrix, &mut c, ldc, false));
                assert!(
                    message.starts_with(expected),
                    "{kind:?}, {rows} rows, lda {lda}, ldc {ldc}: {message}"
                );
                assert!(c.iter().all(|&x| x == 7.0), "{kind:?}: c written");
            }
        }
    }

    /// Regression: `outputs * inputs` was unchecked, so in a release build a size that wrapped to
    /// 0 let an empty weight through, packed into a buffer whose size wrapped alike.
    #[test]
    #[should_panic(expected = "weight of 0 values is not")]
    fn a_weight_whose_size_overflows_panics_instead_of_packing() {
        Matrix::from_rows(KernelKind::Avx2Fma, &[], usize::MAX / 2 + 1, 2);
    }

    #[test]
    fn every_way_to_make_a_matrix_checks_its_sizes_without_overflow() {
        let (half, empty): (usize, &[f32]) = (usize::MAX / 2 + 1, &[]);
        for kind in KernelKind::ALL {
            let stacked_sum = || {
                drop(Matrix::stacked(kind, &[(empty, usize::MAX), (empty, 1)], 0));
            };
            for (message, expected) in [
                (
                    panic_message(|| drop(Matrix::from_rows(kind, empty, half, 2))),
                    "weight of 0 values is not",
                ),
                (
                    panic_message(|| drop(Matrix::from_columns(kind, empty, 2, half))),
                    "matrix of 0 values is not",
                ),
                (
                    panic_message(|| drop(Matrix::stacked(kind, &[(empty, half)], 2))),
                    "weight of 0 values is not",
                ),
                (
                    panic_message(stacked_sum),
                    "the stacked layers' outputs overflow usize",
                ),
            ] {
                assert!(message.starts_with(expected), "{kind:?}: {message}");
            }
        }
    }

    pub(super) fn lcg(seed: &mut u64) -> f32 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((*seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    /// The product in f64 over the operands as `kind` reads them (rounded to bf16, f32, or
    /// quantized to int8 and scaled back): what each kernel must reach to within f32 summation
    /// error.
    fn reference(
        kind: KernelKind,
        a: &[f32],
        rows: usize,
        w: &[f32],
        outputs: usize,
        inputs: usize,
    ) -> Vec<f64> {
        if kind.quantized() {
            return int8::reference(a, rows, w, outputs, inputs);
        }
        let r = |x: f32| match kind.weights() {
            "bf16" => f64::from(bf16_to_f32(bf16_bits(x))),
            _ => f64::from(x),
        };
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
        check_with(kind, rows, outputs, inputs, |a, matrix, c, ldc| {
            matmul(a, rows, inputs, matrix, c, ldc, parallel)
        });
    }

    /// `product` (a, the packed matrix, c, ldc) against the reference of the operands as `kind`
    /// reads them.
    fn check_with(
        kind: KernelKind,
        rows: usize,
        outputs: usize,
        inputs: usize,
        product: impl Fn(&[f32], &Matrix, &mut [f32], usize),
    ) {
        let mut seed = (rows * 31 + outputs * 7 + inputs) as u64;
        let a: Vec<f32> = (0..rows * inputs).map(|_| lcg(&mut seed)).collect();
        let w: Vec<f32> = (0..outputs * inputs).map(|_| lcg(&mut seed)).collect();
        let matrix = Matrix::from_rows(kind, &w, outputs, inputs);
        // A wider output buffer: columns past `outputs` must stay untouched.
        let ldc = outputs + 3;
        let mut c = vec![7.0f32; rows * ldc];
        product(&a, &matrix, &mut c, ldc);
        let expected = reference(kind, &a, rows, &w, outputs, inputs);
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
    fn every_kernel_computes_the_product_of_the_operands_as_it_reads_them() {
        for kind in KernelKind::supported() {
            for (rows, outputs, inputs) in [
                (1, 32, 2),
                (3, 5, 7),
                (9, 70, 33),
                (17, 64, 256),
                (40, 96, 130),
                // Past one block of rows of the f32 kernel, and an odd panel remainder.
                (101, 23, 41),
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
        // `Avx512Bf16` named on a CPU without it runs the portable kernel (`Avx2Fma` without AVX2
        // its plain-Rust tile); with it, a product of 16 or fewer columns whose last row ends `c`
        // forms no pointer past it. The values are exact in bf16 and their sums in f32, so every
        // kind gives the same bits.
        for kind in [
            KernelKind::AmxBf16,
            KernelKind::Avx512Bf16,
            KernelKind::Avx2Fma,
            KernelKind::Portable,
        ] {
            for (rows, outputs) in [(1, 16), (2, 8), (3, 1)] {
                let inputs = 4;
                let w: Vec<f32> = (0..outputs * inputs).map(|x| x as f32 * 0.25).collect();
                let a: Vec<f32> = (0..rows * inputs).map(|x| 1.0 - x as f32 * 0.5).collect();
                let matrix = Matrix::from_rows(kind, &w, outputs, inputs);
                let mut c = vec![0.0f32; rows * outputs];
                matmul(&a, rows, inputs, &matrix, &mut c, outputs, false);
                let portable = Matrix::from_rows(KernelKind::Portable, &w, outputs, inputs);
                let mut want = vec![0.0f32; rows * outputs];
                matmul(&a, rows, inputs, &portable, &mut want, outputs, false);
                assert_eq!(c, want, "{kind:?} {rows}x{outputs}");
            }
        }
        // int8 rounds these values, so it is held to its own portable tile.
        for (rows, outputs) in [(1, 16), (2, 8), (3, 1)] {
            let inputs = 4;
            let w: Vec<f32> = (0..outputs * inputs).map(|x| x as f32 * 0.25).collect();
            let a: Vec<f32> = (0..rows * inputs).map(|x| 1.0 - x as f32 * 0.5).collect();
            every_int8_kind(&a, rows, &w, outputs, inputs, false);
        }
    }

    /// Every int8 kind's product (each on its own tiles where this CPU has them, else on those it
    /// falls back to), held to the portable tile's bits; the products, kind by kind.
    fn every_int8_kind(
        a: &[f32],
        rows: usize,
        w: &[f32],
        outputs: usize,
        inputs: usize,
        parallel: bool,
    ) -> Vec<(KernelKind, Vec<f32>)> {
        let kinds = [
            KernelKind::AmxInt8,
            KernelKind::Avx512Vnni,
            KernelKind::AvxVnni,
        ];
        kinds
            .into_iter()
            .map(|kind| {
                let matrix = Matrix::from_rows(kind, w, outputs, inputs);
                let mut c = vec![0f32; rows * outputs];
                matmul(a, rows, inputs, &matrix, &mut c, outputs, parallel);
                assert_eq!(
                    c,
                    int8_portable(a, rows, &matrix),
                    "{kind:?} {rows}x{outputs}, available: {}",
                    kind.available()
                );
                (kind, c)
            })
            .collect()
    }

    /// `a · Wᵀ` by the portable int8 tile, for a matrix packed for the int8 kind.
    fn int8_portable(a: &[f32], rows: usize, matrix: &Matrix) -> Vec<f32> {
        let Layout::Int8(packed) = &matrix.layout else {
            panic!("an int8 kind packs int8")
        };
        let (inputs, outputs) = (matrix.inputs, matrix.outputs);
        let quantized = int8::quantize_rows(a, rows, inputs, inputs, false, true, rows);
        let mut c = vec![0f32; rows * outputs];
        let out = Output::new(&mut c, outputs, outputs);
        for panel in 0..packed.panels() {
            int8::portable_panel(&quantized, rows, packed, panel, out);
        }
        c
    }

    #[test]
    fn int8_on_vnni_gives_the_portable_tiles_bits_and_stays_near_the_f32_product() {
        let (rows, outputs, inputs) = (19, 70, 130);
        let mut seed = 7;
        let a: Vec<f32> = (0..rows * inputs).map(|_| lcg(&mut seed)).collect();
        let w: Vec<f32> = (0..outputs * inputs).map(|_| lcg(&mut seed)).collect();
        let exact = reference(KernelKind::Portable, &a, rows, &w, outputs, inputs);
        for (kind, c) in every_int8_kind(&a, rows, &w, outputs, inputs, true) {
            eprintln!("{kind:?} available: {}", kind.available());
            // Each operand is off by at most half a step of 1/127 of its row's largest value;
            // over 130 products of values below 1 the error stays a small part of the product's
            // size.
            let (mut error, mut size) = (0f64, 0f64);
            for (got, want) in c.iter().zip(&exact) {
                error += (f64::from(*got) - want).powi(2);
                size += want.powi(2);
            }
            let relative = (error / size).sqrt();
            assert!(relative < 0.02, "{kind:?}: relative error {relative}");
        }
    }

    #[test]
    fn the_amx_layout_gives_the_product_on_any_cpu_and_amx_runs_only_where_granted() {
        // Pairs padded to whole tiles, read by the tiles where Linux grants them and by the
        // AVX-512 BF16 or portable kernel elsewhere: the same product either way. Shapes with
        // one and two row tiles, partial row, column and pair tiles, and several panels.
        for (rows, outputs, inputs) in [(1, 16, 32), (16, 32, 64), (33, 48, 770), (5, 70, 130)] {
            check(KernelKind::AmxBf16, rows, outputs, inputs, false);
            check(KernelKind::AmxBf16, rows, outputs, inputs, true);
        }
        if KernelKind::AmxBf16.available() {
            eprintln!("AMX-BF16 granted: the products above ran on tiles");
        } else {
            eprintln!("no AMX-BF16 on this CPU (or not granted): the tile kernel is not selected");
            assert_ne!(KernelKind::detect(), KernelKind::AmxBf16);
            assert!(!KernelKind::supported().contains(&KernelKind::AmxBf16));
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_amx_loops_give_the_product_on_tiles_emulated_on_any_cpu() {
        // The tile kernel's blocking, padding and edges, on tiles computed in plain Rust: one
        // and two row tiles, partial row, column and pair tiles, several panels, split in two
        // threads' shares as `matmul` splits them.
        for (rows, outputs, inputs) in [
            (1, 16, 32),
            (16, 32, 64),
            (17, 33, 300),
            (33, 48, 770),
            (40, 96, 130),
            (101, 23, 41),
        ] {
            check_with(
                KernelKind::AmxBf16,
                rows,
                outputs,
                inputs,
                |a, matrix, c, ldc| {
                    let Layout::Bf16(packed) = &matrix.layout else {
                        panic!("AMX packs bf16")
                    };
                    let padded_rows = rows.next_multiple_of(AMX_TILE);
                    let a = pack_rows(a, rows, inputs, inputs, packed.pairs(), padded_rows);
                    let out = Output::new(c, ldc, outputs);
                    let panels = packed.panels();
                    for share in [0..panels / 2, panels / 2..panels] {
                        let mut tiles = amx::Emulated::default();
                        amx::panels_on(&mut tiles, &a, rows, &packed.data, share, out);
                    }
                },
            );
        }
    }

    #[test]
    fn columns_layout_is_the_transpose_of_rows() {
        let m: Vec<f32> = (0..12).map(|x| x as f32).collect(); // [3 inputs, 4 outputs]
        let transposed: Vec<f32> = (0..4)
            .flat_map(|o| (0..3).map(move |i| (i * 4 + o) as f32))
            .collect();
        let a = [1.0, -2.0, 0.5, 3.0, 0.25, -1.0];
        for kind in KernelKind::supported() {
            let product = |matrix: &Matrix| {
                let mut c = vec![0f32; 8];
                matmul(&a, 2, 3, matrix, &mut c, 4, false);
                c
            };
            assert_eq!(
                product(&Matrix::from_columns(kind, &m, 3, 4)),
                product(&Matrix::from_rows(kind, &transposed, 4, 3)),
                "{kind:?}"
            );
        }
    }
}
