//! bfloat16 conversion, the same on every CPU: round to nearest even, subnormals to zero (what
//! AVX-512 BF16's conversion instruction does, so the portable path rounds alike).

/// The bfloat16 nearest to `x` as its 16 bits.
#[inline(always)]
pub fn bf16_bits(x: f32) -> u16 {
    let bits = x.to_bits();
    if bits & 0x7f80_0000 == 0 {
        // Zero or subnormal: flushed, sign kept.
        return ((bits >> 16) & 0x8000) as u16;
    }
    if bits & 0x7fff_ffff > 0x7f80_0000 {
        return 0x7fc0; // NaN stays NaN
    }
    let rounded = bits + 0x7fff + ((bits >> 16) & 1);
    (rounded >> 16) as u16
}

/// The f32 a bfloat16 stands for (exact).
#[inline(always)]
pub fn bf16_to_f32(bits: u16) -> f32 {
    f32::from_bits(u32::from(bits) << 16)
}

/// A row of f32 as bfloat16 pairs, `(x[2i], x[2i + 1])` in one u32 (low half first, as the dot
/// product instruction reads them); an odd length is padded with a zero.
pub(crate) fn pack_pairs(row: &[f32], out: &mut [u32]) {
    let pairs = row.chunks_exact(2);
    let tail = pairs.remainder();
    let mut written = 0;
    for (slot, pair) in out.iter_mut().zip(pairs) {
        *slot = u32::from(bf16_bits(pair[0])) | (u32::from(bf16_bits(pair[1])) << 16);
        written += 1;
    }
    if let [last] = tail {
        out[written] = u32::from(bf16_bits(*last));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_to_nearest_even_and_flushes_subnormals() {
        assert_eq!(bf16_to_f32(bf16_bits(1.0)), 1.0);
        // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1.0).
        assert_eq!(bf16_to_f32(bf16_bits(1.0 + 1.0 / 256.0)), 1.0);
        assert_eq!(bf16_to_f32(bf16_bits(1.0 + 3.0 / 256.0)), 1.0 + 4.0 / 256.0);
        assert_eq!(bf16_to_f32(bf16_bits(-2.5)), -2.5);
        assert_eq!(bf16_to_f32(bf16_bits(1e-40)), 0.0);
        assert!(bf16_to_f32(bf16_bits(f32::NAN)).is_nan());
        assert_eq!(bf16_to_f32(bf16_bits(f32::INFINITY)), f32::INFINITY);
    }

    #[test]
    fn pairs_put_the_even_element_low_and_pad_odd_rows() {
        let mut out = [0u32; 2];
        pack_pairs(&[1.0, 2.0, 3.0], &mut out);
        assert_eq!(bf16_to_f32(out[0] as u16), 1.0);
        assert_eq!(bf16_to_f32((out[0] >> 16) as u16), 2.0);
        assert_eq!(out[1], u32::from(bf16_bits(3.0)));
    }
}
