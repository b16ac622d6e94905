//! Synthetic models through the real loader, and agreement between weight formats and devices.
//! The CPU tests run everywhere; the CUDA ones are compiled only with `--features cuda` and need a
//! GPU (scripts/bench-gpu.sh runs them on one, from the bundle scripts/pack-gpu.sh makes).

use std::path::{Path, PathBuf};

use aegis_engine::{
    check_devices, resolve, write_synthetic_gguf, DeviceChoice, GemmaEngine, GemmaShape,
    HubOptions, LanguageModel, LoadOptions, ModelSpec, ResolvedModel, Segment, SyntheticSpec,
    WeightFormat,
};

/// The tiny synthetic model, written once per test binary (bf16 storage, as the 4B bench uses).
fn tiny_model() -> &'static Path {
    static PATH: std::sync::OnceLock<(tempfile::TempDir, PathBuf)> = std::sync::OnceLock::new();
    let (_, path) = PATH.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tiny-synthetic.gguf");
        let spec = SyntheticSpec {
            shape: GemmaShape::tiny(),
            seed: 11,
            dtype: aegis_engine::synthetic_storage("bf16").expect("dtype"),
        };
        write_synthetic_gguf(&path, &spec, &mut |_, _| {}).expect("write synthetic model");
        (dir, path)
    });
    path
}

fn load(path: Option<&Path>, device: DeviceChoice, format: WeightFormat) -> GemmaEngine {
    GemmaEngine::load(&resolved(path), &options(device, format)).expect("load")
}

fn resolved(path: Option<&Path>) -> ResolvedModel {
    let spec = match path {
        Some(p) => ModelSpec::parse(&p.to_string_lossy()).expect("spec"),
        None => ModelSpec::Default,
    };
    resolve(&spec, &HubOptions::default()).expect("resolve (is the model set up?)")
}

fn options(device: DeviceChoice, format: WeightFormat) -> LoadOptions {
    LoadOptions {
        device,
        weight_format: Some(format),
        ..LoadOptions::default()
    }
}

/// Every prompt within the check's own tolerance and, where given, within `measured_bound` (a
/// regression guard set just above what this machine measured).
fn assert_agree(
    path: Option<&Path>,
    device: DeviceChoice,
    format: WeightFormat,
    measured_bound: Option<f32>,
) {
    let report = check_devices(&resolved(path), &options(device, format)).expect("check");
    for result in &report.prompts {
        eprintln!("{format:?} on {device:?}: {result:?}");
        assert!(
            result.passes(),
            "{} on {device:?} in {format:?}: relative error {} over {}",
            result.label,
            result.relative,
            result.tolerance
        );
        if let Some(bound) = measured_bound {
            assert!(
                result.relative < bound,
                "{}: {}",
                result.label,
                result.relative
            );
        }
    }
    assert_eq!(report.prompts.len(), 3);
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn a_synthetic_model_loads_through_the_real_loader_and_says_so() {
    let engine = load(Some(tiny_model()), DeviceChoice::Cpu, WeightFormat::F32);
    assert!(engine.info().synthetic, "{:?}", engine.info());
    let config = engine.model().config();
    assert_eq!((config.num_layers, config.hidden_size), (6, 64));
    assert!(config.is_sliding(0) && !config.is_sliding(5));
    let prompt = vec![
        Segment::Template("Is this spam? ".into()),
        Segment::User("win a prize now".into()),
    ];
    let scores = engine.score(std::slice::from_ref(&prompt)).expect("score");
    let p = scores.answers[0].p_yes;
    assert!(p > 0.0 && p < 1.0, "{p}");
    let encoding = engine
        .encode_batch(&[prompt], &[3])
        .remove(0)
        .expect("encode");
    assert_eq!(encoding.means[0].len(), 64);
}

#[test]
fn the_same_seed_writes_the_same_model() {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = SyntheticSpec {
        shape: GemmaShape::tiny(),
        seed: 11,
        dtype: aegis_engine::synthetic_storage("bf16").expect("dtype"),
    };
    let again = dir.path().join("again.gguf");
    write_synthetic_gguf(&again, &spec, &mut |_, _| {}).expect("write");
    let hash = |p: &Path| aegis_engine::file_sha256(p).expect("hash");
    assert_eq!(hash(&again), hash(tiny_model()));
}

#[test]
fn bf16_agrees_with_f32_on_a_synthetic_model() {
    // Measured 1.1-1.8%.
    assert_agree(
        Some(tiny_model()),
        DeviceChoice::Cpu,
        WeightFormat::Bf16,
        Some(0.04),
    );
}

#[test]
fn bf16_agrees_with_f32_on_the_real_model() {
    // Measured 1.5%, 2.6%, 4.3% on 12, 256 and 768 tokens.
    assert_agree(None, DeviceChoice::Cpu, WeightFormat::Bf16, Some(0.07));
}

#[cfg(not(feature = "cuda"))]
#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn asking_for_a_gpu_in_a_cpu_build_is_a_clear_error() {
    let resolved = resolve(&ModelSpec::Default, &HubOptions::default()).expect("resolve");
    let options = LoadOptions {
        device: DeviceChoice::Cuda(0),
        ..LoadOptions::default()
    };
    let err = GemmaEngine::load(&resolved, &options).expect_err("no CUDA in this build");
    assert!(err.to_string().contains("--features cuda"), "{err}");
}

#[cfg(feature = "cuda")]
mod cuda {
    use super::*;

    #[test]
    fn gpu_f32_agrees_with_cpu_on_a_synthetic_model() {
        assert_agree(
            Some(tiny_model()),
            DeviceChoice::Cuda(0),
            WeightFormat::F32,
            None,
        );
    }

    #[test]
    fn gpu_bf16_agrees_with_cpu_on_a_synthetic_model() {
        assert_agree(
            Some(tiny_model()),
            DeviceChoice::Cuda(0),
            WeightFormat::Bf16,
            None,
        );
    }

    /// The GPU's fast path (padded attention after the cached openings, every prompt of every
    /// message in one step) answers as each prompt read alone on the same GPU.
    #[test]
    #[cfg_attr(
        not(aegis_models),
        ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
    )]
    fn gpu_fast_path_equals_one_prompt_at_a_time() {
        use crate::scoring::{messages_of_many_lengths, validator_prompts};
        let engine = load(Some(tiny_model()), DeviceChoice::Cuda(0), WeightFormat::F32);
        for policy_first in [false, true] {
            let batch: Vec<Vec<Vec<Segment>>> = messages_of_many_lengths()
                .iter()
                .map(|m| validator_prompts(m, policy_first))
                .collect();
            let cold = engine.score_batch(&batch);
            let warm = engine.score_batch(&batch);
            for (i, prompts) in batch.iter().enumerate() {
                let reference = engine.score_separately(prompts).expect("separately");
                for fast in [&cold[i], &warm[i]] {
                    let fast = fast.as_ref().expect("batched");
                    for (want, got) in reference.answers.iter().zip(&fast.answers) {
                        assert!(
                            (want.p_yes - got.p_yes).abs() < 1e-3,
                            "message {i}, policy first {policy_first}: {} vs {}",
                            want.p_yes,
                            got.p_yes
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn gpu_agrees_with_cpu_on_the_real_model() {
        for format in [
            WeightFormat::F32,
            WeightFormat::Bf16,
            WeightFormat::Quantized,
        ] {
            assert_agree(None, DeviceChoice::Cuda(0), format, None);
        }
    }

    #[test]
    #[cfg_attr(
        not(aegis_models),
        ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
    )]
    fn auto_picks_the_gpu_and_bf16() {
        let resolved = resolve(&ModelSpec::Default, &HubOptions::default()).expect("resolve");
        let auto = GemmaEngine::load(&resolved, &LoadOptions::default()).expect("load");
        assert_eq!(
            (
                auto.info().device.as_str(),
                auto.info().weight_format.as_str()
            ),
            ("cuda:0", "bf16")
        );
    }
}
