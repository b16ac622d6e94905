//! The product against an f64 reference for every kind, and the checks that keep it sound.

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
    let payload =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).expect_err("expected a panic");
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
fn our_tile_products_leave_the_thread_the_tile_configuration_it_had() {
    // The worker thread runs candle's Q4_K matmuls, which configure the tiles once per thread
    // and then rely on it, between the encoder's products: a guard model product, an encoder
    // product and a model product again must find the model's configuration in place. Both
    // tile kernels, from a foreign configuration and from none.
    use super::amx::{
        available, foreign_tile_configuration, load_foreign_tile_configuration, release_tiles,
        thread_tile_configuration,
    };
    if !available() {
        eprintln!("no AMX-BF16 on this CPU (or not granted): no tiles to configure");
        assert!(!KernelKind::supported().contains(&KernelKind::AmxBf16));
        return;
    }
    let int8 = KernelKind::AmxInt8.available();
    let products = || {
        check(KernelKind::AmxBf16, 33, 48, 770, false);
        if int8 {
            let mut seed = 5;
            let a: Vec<f32> = (0..33 * 770).map(|_| lcg(&mut seed)).collect();
            let w: Vec<f32> = (0..48 * 770).map(|_| lcg(&mut seed)).collect();
            let matrix = Matrix::from_rows(KernelKind::AmxInt8, &w, 48, 770);
            let mut c = vec![0f32; 33 * 48];
            matmul(&a, 33, 770, &matrix, &mut c, 48, false);
            assert_eq!(c, int8_portable(&a, 33, &matrix));
        }
    };
    load_foreign_tile_configuration();
    products();
    assert_eq!(
        thread_tile_configuration(),
        foreign_tile_configuration(),
        "the foreign configuration was not put back"
    );
    release_tiles();
    products();
    let left = thread_tile_configuration();
    assert_eq!(left, [0; 64], "our products left the tiles configured");
    eprintln!("AMX-BF16 granted (AMX-INT8: {int8}): products ran between configurations");
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
