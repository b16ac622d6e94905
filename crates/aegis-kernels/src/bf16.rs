//! bfloat16 conversion, the same on every CPU: round to nearest even, subnormals to zero (what
//! AVX-512 BF16's conversion instruction does, so the portable path rounds alike).

/// The bfloat16 nearest to `x` as its 16 bits. Written without branches (each case computed,
/// one chosen) so loops over it vectorise: packing attention's operands runs it per message.
#[inline(always)]
pub fn bf16_bits(x: f32) -> u16 {
    let bits = x.to_bits();
    // Round to nearest even; wrapping only for NaNs, which are replaced below.
    let rounded = (bits.wrapping_add(0x7fff + ((bits >> 16) & 1)) >> 16) as u16;
    // Zero or subnormal: flushed, sign kept.
    let flushed = ((bits >> 16) & 0x8000) as u16;
    let subnormal = bits & 0x7f80_0000 == 0;
    let nan = bits & 0x7fff_ffff > 0x7f80_0000;
    if nan {
        0x7fc0
    } else if subnormal {
        flushed
    } else {
        rounded
    }
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
        assert_eq!(
            bf16_to_f32(bf16_bits(-1e-40)).to_bits(),
            (-0.0f32).to_bits()
        );
        // The largest finite values round up to infinity, of their sign.
        assert_eq!(bf16_to_f32(bf16_bits(f32::MAX)), f32::INFINITY);
        assert_eq!(bf16_to_f32(bf16_bits(f32::MIN)), f32::NEG_INFINITY);
        assert_eq!(
            bf16_bits(f32::from_bits(0xffc0_0001)),
            0x7fc0,
            "a negative NaN"
        );
    }

    /// The branch-free form against the rule written case by case, over a spread of bit
    /// patterns covering every exponent, both signs, ties and NaNs.
    #[test]
    fn the_branch_free_rounding_is_the_rule_case_by_case() {
        let rule = |bits: u32| -> u16 {
            if bits & 0x7f80_0000 == 0 {
                return ((bits >> 16) & 0x8000) as u16;
            }
            if bits & 0x7fff_ffff > 0x7f80_0000 {
                return 0x7fc0;
            }
            ((u64::from(bits) + 0x7fff + u64::from((bits >> 16) & 1)) >> 16) as u16
        };
        let mut bits = 0u32;
        for step in 0..2_000_000u32 {
            bits = bits.wrapping_add(2_147_483_647 - step % 65_537);
            for b in [bits, bits & 0xffff_8000, (bits & 0xffff_0000) | 0x8000] {
                assert_eq!(bf16_bits(f32::from_bits(b)), rule(b), "{b:#010x}");
            }
        }
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
