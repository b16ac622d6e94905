//! The steps between the matrix products, written so the compiler vectorises them: sums run in
//! 16 fixed lanes (the same order on every CPU, so every build gives the same bits), and `exp` is
//! a branch-free polynomial instead of libm's call. Each public function picks an AVX-512 or AVX2
//! build of the same code when the CPU has it (FMA left out: a fused multiply-add would change the
//! bits, and the compiler never fuses on its own).

const LANES: usize = 16;

/// Runs `$body` (an `#[inline(always)]` function) compiled for AVX-512 or else AVX2 when the CPU
/// has it, otherwise for the baseline target. All compile the same operations in the same order.
macro_rules! dispatch {
    ($avx512:ident, $body:ident, ($($arg:ident: $ty:ty),*)) => {{
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx512f")]
            fn $avx512($($arg: $ty),*) {
                $body($($arg),*)
            }
            if std::arch::is_x86_feature_detected!("avx512f") {
                // SAFETY: the CPU has just reported AVX-512F, the only feature the function
                // is compiled for.
                #[allow(unsafe_code)]
                unsafe {
                    return $avx512($($arg),*);
                }
            }
            #[target_feature(enable = "avx2")]
            fn avx2($($arg: $ty),*) {
                $body($($arg),*)
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU has just reported AVX2, the only feature the function is
                // compiled for.
                #[allow(unsafe_code)]
                unsafe {
                    return avx2($($arg),*);
                }
            }
        }
        $body($($arg),*)
    }};
}

/// `Σ x²` in 16 lanes, then the lanes in order.
#[inline(always)]
fn sum_of_squares(x: &[f32]) -> f32 {
    let mut lanes = [0f32; LANES];
    let chunks = x.chunks_exact(LANES);
    let tail = chunks.remainder();
    for chunk in chunks {
        for (lane, &v) in lanes.iter_mut().zip(chunk) {
            *lane += v * v;
        }
    }
    for (lane, &v) in lanes.iter_mut().zip(tail) {
        *lane += v * v;
    }
    lanes.iter().sum()
}

#[inline(always)]
fn rms_norm_body(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    let dim = weight.len();
    for (row, out) in x.chunks_exact(dim).zip(out.chunks_exact_mut(dim)) {
        let rms = (sum_of_squares(row) / dim as f32 + eps).sqrt();
        for ((o, &v), &w) in out.iter_mut().zip(row).zip(weight) {
            *o = v / rms * w;
        }
    }
}

/// RMS norm of each row of `x` (rows of `weight.len()`), scaled by `weight`, into `out`.
pub fn rms_norm(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    assert_eq!(x.len(), out.len());
    dispatch!(rms_norm_avx512, rms_norm_body, (x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]))
}

#[inline(always)]
fn rms_norm_in_place_body(x: &mut [f32], weight: &[f32], eps: f32) {
    let dim = weight.len();
    for row in x.chunks_exact_mut(dim) {
        let rms = (sum_of_squares(row) / dim as f32 + eps).sqrt();
        for (v, &w) in row.iter_mut().zip(weight) {
            *v = *v / rms * w;
        }
    }
}

/// [`rms_norm`] over `x` itself.
pub fn rms_norm_in_place(x: &mut [f32], weight: &[f32], eps: f32) {
    dispatch!(rms_norm_in_place_avx512, rms_norm_in_place_body, (x: &mut [f32], weight: &[f32], eps: f32))
}

#[inline(always)]
fn add_rms_norm_body(residual: &mut [f32], x: &[f32], weight: &[f32], eps: f32) {
    let dim = weight.len();
    for (res, row) in residual.chunks_exact_mut(dim).zip(x.chunks_exact(dim)) {
        let rms = (sum_of_squares(row) / dim as f32 + eps).sqrt();
        for ((r, &v), &w) in res.iter_mut().zip(row).zip(weight) {
            *r += v / rms * w;
        }
    }
}

/// `residual += rms_norm(x)`: Gemma 3's post-norms before each residual addition.
pub fn add_rms_norm(residual: &mut [f32], x: &[f32], weight: &[f32], eps: f32) {
    assert_eq!(residual.len(), x.len());
    dispatch!(add_rms_norm_avx512, add_rms_norm_body, (residual: &mut [f32], x: &[f32], weight: &[f32], eps: f32))
}

/// `e^x` to about 2 ulp over f32's range, branch-free so loops over it vectorise (Cephes'
/// polynomial after reducing by powers of two). Below -87 it returns about 1e-38, not 0.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0; // 1.5 * 2^23: adding it rounds to an integer
    const LN2_HIGH: f32 = 0.693_359_4;
    const LN2_LOW: f32 = -2.121_944_4e-4;
    let x = x.clamp(-87.0, 88.0);
    let shifted = x * std::f32::consts::LOG2_E + MAGIC;
    let k = shifted - MAGIC;
    let r = x - k * LN2_HIGH - k * LN2_LOW;
    let mut p = 1.987_569_1e-4;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5;
    let e = p * r * r + r + 1.0;
    let exponent = shifted
        .to_bits()
        .wrapping_sub(MAGIC.to_bits())
        .wrapping_add(127)
        << 23;
    e * f32::from_bits(exponent)
}

#[inline(always)]
fn gelu_mul_body(gate: &[f32], up: &[f32], out: &mut [f32]) {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    for ((o, &g), &u) in out.iter_mut().zip(gate).zip(up) {
        // 0.5·g·(1 + tanh(z)) = g / (1 + e^(-2z))
        let z = SQRT_2_OVER_PI * g * (1.0 + 0.044_715 * g * g);
        *o = g / (1.0 + exp(-2.0 * z)) * u;
    }
}

/// `out = gelu_tanh(gate) · up`, element by element: Gemma's GeGLU.
pub fn gelu_mul(gate: &[f32], up: &[f32], out: &mut [f32]) {
    assert!(gate.len() == up.len() && up.len() == out.len());
    dispatch!(gelu_mul_avx512, gelu_mul_body, (gate: &[f32], up: &[f32], out: &mut [f32]))
}

#[inline(always)]
fn softmax_body(row: &mut [f32]) {
    let mut lanes = [f32::NEG_INFINITY; LANES];
    for chunk in row.chunks(LANES) {
        for (lane, &v) in lanes.iter_mut().zip(chunk) {
            *lane = lane.max(v);
        }
    }
    let max = lanes.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sums = [0f32; LANES];
    for chunk in row.chunks_mut(LANES) {
        for (sum, v) in sums.iter_mut().zip(chunk) {
            *v = exp(*v - max);
            *sum += *v;
        }
    }
    let sum: f32 = sums.iter().sum();
    for v in row.iter_mut() {
        *v /= sum;
    }
}

/// Softmax of `row` in place.
pub fn softmax(row: &mut [f32]) {
    dispatch!(softmax_avx512, softmax_body, (row: &mut [f32]))
}

#[inline(always)]
fn rope_body(x: &mut [f32], cos: &[f32], sin: &[f32]) {
    let half = cos.len();
    let (first, second) = x.split_at_mut(half);
    for (((a, b), &c), &s) in first.iter_mut().zip(second.iter_mut()).zip(cos).zip(sin) {
        let (x1, x2) = (*a, *b);
        *a = x1 * c - x2 * s;
        *b = x1 * s + x2 * c;
    }
}

/// Rotary position embedding, rotate-half form, of one head's vector (`2 * cos.len()` long).
pub fn rope(x: &mut [f32], cos: &[f32], sin: &[f32]) {
    assert_eq!(x.len(), 2 * cos.len());
    dispatch!(rope_avx512, rope_body, (x: &mut [f32], cos: &[f32], sin: &[f32]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_close_to_libm_over_the_range_attention_and_gelu_use() {
        let mut worst = 0f32;
        let mut x = -80.0f32;
        while x < 80.0 {
            let relative = (exp(x) - x.exp()).abs() / x.exp();
            worst = worst.max(relative);
            x += 0.0137;
        }
        assert!(worst < 4e-7, "worst relative error {worst:e}");
        assert!(exp(-1e4) < 1e-37 && exp(1e4).is_finite());
    }

    #[test]
    fn gelu_matches_the_tanh_formula() {
        let gate: Vec<f32> = (-400..400).map(|i| i as f32 / 37.0).collect();
        let up = vec![2.0; gate.len()];
        let mut out = vec![0.0; gate.len()];
        gelu_mul(&gate, &up, &mut out);
        for (&g, &o) in gate.iter().zip(&out) {
            let want = 0.5 * g * (1.0 + (0.797_884_6 * (g + 0.044_715 * g * g * g)).tanh()) * 2.0;
            assert!(
                (o - want).abs() <= 2e-6 * (1.0 + want.abs()),
                "gelu({g}) = {o}, want {want}"
            );
        }
    }

    #[test]
    fn norms_softmax_and_rope_compute_their_formulas() {
        let x = [3.0, 4.0, 0.0, 0.0];
        let mut out = [0.0; 4];
        rms_norm(&x, &[1.0, 2.0, 1.0, 1.0], 0.0, &mut out);
        assert_eq!(out, [1.2, 3.2, 0.0, 0.0]);
        let mut residual = [1.0; 4];
        add_rms_norm(&mut residual, &x, &[1.0; 4], 0.0);
        assert_eq!(residual, [2.2, 2.6, 1.0, 1.0]);
        let mut row = [1.0, 2.0, 3.0];
        softmax(&mut row);
        let total: f32 = [1f32, 2.0, 3.0].iter().map(|v| v.exp()).sum();
        for (got, v) in row.iter().zip([1f32, 2.0, 3.0]) {
            assert!((got - v.exp() / total).abs() < 1e-6);
        }
        let mut v = [1.0, 2.0];
        rope(&mut v, &[0.0], &[1.0]);
        assert_eq!(v, [-2.0, 1.0]);
    }
}
