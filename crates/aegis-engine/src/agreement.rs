//! Do two loaded copies of one model (say CPU f32 and GPU bf16) compute the same thing? Compares
//! last-position logits over the whole vocabulary against a tolerance stated per weight format.

use crate::engine::{argmax, GemmaEngine};
use crate::error::Result;
use crate::language_model::LanguageModel;
use crate::load_options::{DeviceChoice, LoadOptions};
use crate::model::WeightFormat;
use crate::source::ResolvedModel;
use crate::tokenizer::Segment;

/// How far a candidate's logits may stray from the reference's (always the CPU in f32: the exact
/// computation, quantized blocks dequantized), as a fraction of the largest reference logit (logit
/// scales differ by model; a relative bound means the same for each).
///
/// - f32: both sides round at f32 and differ only in summation order (cuBLAS vs gemm blocking),
///   ~1e-6 per operation over a few hundred operations in depth: 1e-3 is generous and still
///   catches a wrong mask, RoPE table or cache offset, which move logits by tens of percent.
///   Measured on an H100: 2e-7 (real 270M) to 3e-6 (synthetic 4B).
/// - bf16 and quantized: a ceiling of 15%. On another device such a candidate is held to twice the
///   CPU's own error in that format on the same prompt (`calibrated`), because that error depends
///   on the model, its depth and the prompt's length. bf16 rounds weights and every activation to
///   8 mantissa bits: CPU bf16 against f32 measured 1.5%, 2.6%, 4.3% (real 270M, 12/256/768
///   tokens). Quantized weights are the same blocks on both sides, but each side quantizes
///   activations its own way before the block products (q8_1 on CUDA, q8_0/q8_K on the CPU): the
///   two land 1.7% to 5.9% apart on an H100 (real 270M and synthetic shapes), which a fixed 3%
///   wrongly failed.
fn ceiling(format: WeightFormat) -> f32 {
    match format {
        WeightFormat::F32 => 1e-3,
        WeightFormat::Bf16 | WeightFormat::Quantized => 0.15,
    }
}

/// A candidate's tolerance given the CPU's own error in the candidate's format on the same prompt:
/// twice it (two devices rounding in different orders), at least 1%, at most the format's ceiling.
fn calibrated(format: WeightFormat, cpu_own_relative: f32) -> f32 {
    (2.0 * cpu_own_relative).clamp(1e-2, ceiling(format))
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
    /// The CPU's own error in the candidate's format (bf16 or quantized on another device), which
    /// set the tolerance.
    pub cpu_same_format_relative: Option<f32>,
    /// Both sides pick the same most likely next token.
    pub same_top_token: bool,
    pub tolerance: f32,
}

impl LogitAgreement {
    pub fn passes(&self) -> bool {
        self.relative.is_finite() && self.relative <= self.tolerance
    }
}

/// The whole check: which engines ran, and each prompt's result.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AgreementReport {
    pub model: String,
    pub synthetic: bool,
    pub reference: Side,
    pub candidate: Side,
    pub prompts: Vec<LogitAgreement>,
}

/// Where and how one side of the comparison ran.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Side {
    pub device: String,
    pub weights: String,
}

impl Side {
    fn of(engine: &GemmaEngine) -> Self {
        Self {
            device: engine.info().device.clone(),
            weights: engine.info().weight_format.clone(),
        }
    }
}

impl AgreementReport {
    pub fn passed(&self) -> bool {
        self.prompts.iter().all(LogitAgreement::passes)
    }
}

/// Loads `resolved` as `options` ask (the candidate), on the CPU in f32 (the reference), and for
/// bf16 or quantized weights on another device on the CPU in that format too (the calibration);
/// then compares last-position logits on short, medium and past-the-window prompts.
pub fn check_devices(resolved: &ResolvedModel, options: &LoadOptions) -> Result<AgreementReport> {
    let candidate = GemmaEngine::load(resolved, options)?;
    let format = candidate.weight_format();
    let on_cpu = |format: WeightFormat| {
        GemmaEngine::load(
            resolved,
            &LoadOptions {
                device: DeviceChoice::Cpu,
                weight_format: Some(format),
                ..options.clone()
            },
        )
    };
    let reference = on_cpu(WeightFormat::F32)?;
    let calibration = match format {
        WeightFormat::Bf16 | WeightFormat::Quantized if !candidate.model().device().is_cpu() => {
            Some(on_cpu(format)?)
        }
        _ => None,
    };
    let prompts = agreement_prompts(&candidate)?
        .iter()
        .map(|(label, ids)| {
            let want = reference.last_logits(ids)?;
            let got = candidate.last_logits(ids)?;
            let mut result = measure(label, ids.len(), &want, &got, ceiling(format));
            if let Some(cpu) = &calibration {
                let own = measure(label, ids.len(), &want, &cpu.last_logits(ids)?, 0.0).relative;
                result.cpu_same_format_relative = Some(own);
                result.tolerance = calibrated(format, own);
            }
            Ok(result)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(AgreementReport {
        model: candidate.info().id.clone(),
        synthetic: candidate.info().synthetic,
        reference: Side::of(&reference),
        candidate: Side::of(&candidate),
        prompts,
    })
}

/// Short, medium and long prompts as token ids; the long one runs past the sliding window, so local
/// and global attention both get checked. All are capped by the engine's context limit.
fn agreement_prompts(engine: &GemmaEngine) -> Result<Vec<(String, Vec<u32>)>> {
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
        cpu_same_format_relative: None,
        same_top_token: argmax(want) == argmax(got),
        tolerance,
    }
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
            ceiling(WeightFormat::F32),
        );
        assert!(close.passes() && close.same_top_token);
        assert!((close.relative - 0.0005).abs() < 1e-5);
        let far = measure("b", 3, &want, &[9.0, -4.0, 2.0], ceiling(WeightFormat::F32));
        assert!(!far.passes());
        assert!(
            measure(
                "c",
                3,
                &want,
                &[9.0, -4.0, 2.0],
                ceiling(WeightFormat::Bf16)
            )
            .relative
                > 0.09
        );
    }

    #[test]
    fn another_devices_bf16_or_quantized_is_held_to_twice_the_cpus_own_error_within_bounds() {
        for format in [WeightFormat::Bf16, WeightFormat::Quantized] {
            assert_eq!(calibrated(format, 0.03), 0.06);
            assert_eq!(calibrated(format, 0.0), 0.01);
            assert_eq!(calibrated(format, 0.5), ceiling(format));
        }
    }

    #[test]
    fn nan_and_length_mismatch_fail() {
        let t = ceiling(WeightFormat::Bf16);
        assert!(!measure("nan", 2, &[1.0, 2.0], &[f32::NAN, 2.0], t).passes());
        assert!(!measure("short", 2, &[1.0, 2.0], &[1.0], t).passes());
    }
}
