//! `cargo bench -p aegis-kernels`: the packed product on the encoder's shapes, each kernel
//! kind this CPU runs side by side, in GFLOP/s (best of several runs); then the packing of
//! attention's operands, which happens per message, in nanoseconds an element. Compare kinds, or
//! a change against its parent on the same machine; never read one figure alone.

use std::time::Instant;

use aegis_kernels::{matmul, KernelKind, Matrix};

fn main() {
    let kinds = KernelKind::supported();
    // (rows, outputs, inputs): a short message's q/k/v, o, gate/up and down; then a batch of them
    // and one 1,000-token text.
    let shapes = [
        (30, 1280, 768),
        (30, 768, 768),
        (30, 2304, 768),
        (30, 768, 1152),
        (480, 2304, 768),
        (1000, 1280, 768),
        (1000, 768, 1152),
    ];
    println!(
        "{:>6} {:>6} {:>6}  {}",
        "rows",
        "out",
        "in",
        kinds
            .iter()
            .map(|k| format!("{:>14}", k.name()))
            .collect::<String>()
    );
    for (rows, outputs, inputs) in shapes {
        let a: Vec<f32> = (0..rows * inputs)
            .map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5)
            .collect();
        let w: Vec<f32> = (0..outputs * inputs)
            .map(|i| ((i * 104_729) % 997) as f32 / 997.0 - 0.5)
            .collect();
        let mut c = vec![0f32; rows * outputs];
        let flops = 2.0 * (rows * outputs * inputs) as f64;
        let mut line = format!("{rows:>6} {outputs:>6} {inputs:>6}  ");
        for &kind in &kinds {
            let matrix = Matrix::from_rows(kind, &w, outputs, inputs);
            let reps = ((2e9 / flops) as usize).clamp(3, 2000);
            let mut best = f64::MAX;
            for _ in 0..5 {
                let start = Instant::now();
                for _ in 0..reps {
                    matmul(&a, rows, inputs, &matrix, &mut c, outputs, true);
                }
                best = best.min(start.elapsed().as_secs_f64() / reps as f64);
            }
            line += &format!("{:>14.1}", flops / best / 1e9);
        }
        println!("{line}");
    }
    packing(&kinds);
}

/// Attention packs its keys (`from_rows`) and values (`from_columns`) afresh for every block of
/// queries: a sliding layer's block sees up to 640 keys of 256 dimensions.
fn packing(kinds: &[KernelKind]) {
    let (keys, dims) = (640, 256);
    let m: Vec<f32> = (0..keys * dims)
        .map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5)
        .collect();
    println!(
        "\npacking {keys} x {dims}, ns an element{}",
        kinds
            .iter()
            .map(|k| format!("{:>14}", k.name()))
            .collect::<String>()
    );
    type Pack = fn(KernelKind, &[f32], usize, usize) -> Matrix;
    let layouts: [(&str, Pack); 2] = [
        ("keys (from_rows)", Matrix::from_rows),
        ("values (from_columns)", Matrix::from_columns),
    ];
    for (name, pack) in layouts {
        let mut line = format!("{name:<36}");
        for &kind in kinds {
            let mut best = f64::MAX;
            for _ in 0..5 {
                let start = Instant::now();
                for _ in 0..20 {
                    std::hint::black_box(pack(kind, &m, keys, dims));
                }
                best = best.min(start.elapsed().as_secs_f64() / 20.0);
            }
            line += &format!("{:>14.2}", best * 1e9 / (keys * dims) as f64);
        }
        println!("{line}");
    }
}
