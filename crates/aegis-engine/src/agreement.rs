//! Do two loaded copies of one model (say CPU f32 and GPU bf16) compute the same thing? Compares
//! last-position logits over the whole vocabulary against a tolerance stated per weight format.

use crate::engine::{GemmaEngine, LanguageModel};
use crate::error::Result;
use crate::model::WeightFormat;
use crate::tokenizer::Segment;

/// How far a candidate's logits may stray from the reference's, as a fraction of the largest
/// reference logit (logit scales differ by model; a relative bound means the same for each).
///
/// - f32: both sides round at f32 and differ only in summation order (cuBLAS vs gemm blocking),
///   ~1e-6 per operation over a few hundred operations in depth: 1e-3 is generous and still
///   catches a wrong mask, RoPE table or cache offset, which move logits by tens of percent.
/// - bf16: 8 mantissa bits (relative step 2^-8 = 0.4%) on weights and every activation. Measured
///   CPU bf16 against CPU f32 on the real 270M (`aegis model agree --device cpu --weights bf16`):
///   1.5%, 2.6% and 4.3% on 12, 256 and 768 tokens; 8% leaves room for a GPU's rounding order.
/// - quantized: the reference is the same blocks on the CPU; the sides quantize activations
///   differently (q8_1 on CUDA, q8_0/q8_K on the CPU), so between the two above.
pub fn tolerance(format: WeightFormat) -> f32 {
    match format {
        WeightFormat::F32 => 1e-3,
        WeightFormat::Bf16 => 8e-2,
        WeightFormat::Quantized => 3e-2,
    }
}

/// The format the reference side runs in for a candidate format: the exact f32 computation,
/// except for quantized blocks, which only a quantized reference holds bit for bit.
pub fn reference_format(candidate: WeightFormat) -> WeightFormat {
    match candidate {
        WeightFormat::Quantized => WeightFormat::Quantized,
        WeightFormat::F32 | WeightFormat::Bf16 => WeightFormat::F32,
    }
}

/// One prompt's comparison.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LogitAgreement {
    pub label: String,
    pub tokens: usize,
    pub max_abs_diff: f32,
    pub max_abs_reference: f32,
    /// `max_abs_diff / max_abs_reference`: what the tolerance bounds.
    pub relative: f32,
    /// Both sides pick the same most likely next token.
    pub same_top_token: bool,
    pub tolerance: f32,
}

impl LogitAgreement {
    pub fn passes(&self) -> bool {
        self.relative.is_finite() && self.relative <= self.tolerance
    }
}

/// Compares last-position logits of `candidate` (loaded in `format`) with `reference` on each of
/// `prompts` (label, token ids).
pub fn compare_logits(
    reference: &GemmaEngine,
    candidate: &GemmaEngine,
    format: WeightFormat,
    prompts: &[(String, Vec<u32>)],
) -> Result<Vec<LogitAgreement>> {
    prompts
        .iter()
        .map(|(label, ids)| {
            let want = reference.last_logits(ids)?;
            let got = candidate.last_logits(ids)?;
            Ok(measure(label, ids.len(), &want, &got, tolerance(format)))
        })
        .collect()
}

/// Short, medium and long prompts as token ids; the long one runs past the sliding window, so local
/// and global attention both get checked. All are capped by the engine's context limit.
pub fn agreement_prompts(engine: &GemmaEngine) -> Result<Vec<(String, Vec<u32>)>> {
    let text = "Moderators review messages that the guard flags. A message may be spam, toxic, \
                harassment, or unsolicited financial advice; most are none of these. ";
    let window = engine.model().config().sliding_window;
    let limit = engine.info().context_length;
    [("short", 12), ("medium", 256), ("long", window + 256)]
        .into_iter()
        .map(|(label, len)| {
            let len = len.min(limit).max(2);
            // Every repetition is well over ten tokens, so this is always long enough.
            let repeated = text.repeat(len / 10 + 1);
            let mut ids = engine
                .tokenizer()
                .encode_prompt(&[Segment::Template(repeated)])?;
            ids.truncate(len);
            Ok((label.to_string(), ids))
        })
        .collect()
}

fn measure(
    label: &str,
    tokens: usize,
    want: &[f32],
    got: &[f32],
    tolerance: f32,
) -> LogitAgreement {
    let max_abs_reference = want.iter().fold(0f32, |m, x| m.max(x.abs()));
    // A length mismatch or a NaN is a failure, never a pass by omission.
    let max_abs_diff = if want.len() == got.len() {
        want.iter()
            .zip(got)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, |m, d| {
                if m.is_nan() || d.is_nan() {
                    f32::NAN
                } else {
                    m.max(d)
                }
            })
    } else {
        f32::INFINITY
    };
    LogitAgreement {
        label: label.to_string(),
        tokens,
        max_abs_diff,
        max_abs_reference,
        relative: max_abs_diff / max_abs_reference.max(f32::MIN_POSITIVE),
        same_top_token: argmax(want) == argmax(got),
        tolerance,
    }
}

fn argmax(values: &[f32]) -> Option<usize> {
    values
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_error_is_bounded_by_the_formats_tolerance() {
        let want = [10.0, -4.0, 2.0];
        let close = measure(
            "a",
            3,
            &want,
            &[10.005, -4.0, 2.0],
            tolerance(WeightFormat::F32),
        );
        assert!(close.passes() && close.same_top_token);
        assert!((close.relative - 0.0005).abs() < 1e-5);
        let far = measure(
            "b",
            3,
            &want,
            &[9.0, -4.0, 2.0],
            tolerance(WeightFormat::F32),
        );
        assert!(!far.passes());
        assert!(
            measure(
                "c",
                3,
                &want,
                &[9.0, -4.0, 2.0],
                tolerance(WeightFormat::Bf16)
            )
            .relative
                > 0.09
        );
    }

    #[test]
    fn nan_and_length_mismatch_fail() {
        let t = tolerance(WeightFormat::Bf16);
        assert!(!measure("nan", 2, &[1.0, 2.0], &[f32::NAN, 2.0], t).passes());
        assert!(!measure("short", 2, &[1.0, 2.0], &[1.0], t).passes());
    }
}
