//! Our forward pass against llama.cpp's on the same GGUF (fixture written by
//! scripts/reference/llama_cpp_reference.py).

use aegis_engine::{GemmaEngine, KvCache, LoadOptions, Segment, WeightFormat};
use serde::Deserialize;

use crate::common::engine;

#[derive(Deserialize)]
struct Fixture {
    model_sha256: String,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    prompt: String,
    ids: Vec<u32>,
    top_ids: Vec<u32>,
    top_logits: Vec<f32>,
    probe_ids: Vec<u32>,
    probe_logits: Vec<f32>,
    greedy: Vec<u32>,
    greedy_margins: Vec<f32>,
    f64_logits: Vec<f32>,
}

fn fixture() -> Fixture {
    let raw = include_str!("fixtures/llama_cpp_reference.json");
    serde_json::from_str(raw).expect("fixture parses")
}

/// How far a path may land from the float64 forward on one prompt, given llama.cpp's own distance
/// from it on that same prompt (`reference_error`). Every bound is derived per prompt from a
/// reference's own error, never from one machine's run (the kernels, and so the rounding, differ
/// between CPUs).
#[derive(Clone, Copy)]
enum ExactBound {
    /// Dense f32 against the float64 NumPy forward on the same dequantized weights: only float32
    /// rounding separates them. Stated bound: 1e-3 of logits spanning about ±40, i.e. 2.5e-5 of
    /// their range, far above float32's 6e-8 relative rounding through 18 layers, far below any
    /// real fault.
    Dense,
    /// The quantized path rounds activations to 8 bits inside candle's quantized matmuls, as
    /// llama.cpp does: two independent roundings of the same size, so held to a small multiple of
    /// llama.cpp's own error on the same prompt. Three, because one implementation's error varies
    /// by a factor of about 2.5 between prompts (0.27 to 0.67 on the fixture's four), so ours may
    /// land on the far side of a prompt where llama.cpp happened to land close; a real fault (a
    /// wrong mask, RoPE or norm) moves logits by several units, past any of these bounds.
    QuantizedLikeLlamaCpp,
}

impl ExactBound {
    fn bound(self, reference_error: f32) -> f32 {
        match self {
            Self::Dense => 1e-3,
            Self::QuantizedLikeLlamaCpp => 3.0 * reference_error,
        }
    }
}

/// A greedy step whose top two llama.cpp logits are closer than this is a coin toss between two
/// correct implementations; comparison stops there.
const GREEDY_MARGIN: f32 = 1.0;

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn fixture_is_for_the_default_model() {
    assert_eq!(fixture().model_sha256, engine().info_hash());
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn tokenizes_like_llama_cpp() {
    for case in fixture().cases {
        let ids = engine()
            .tokenizer()
            .encode_prompt(&[Segment::Template(case.prompt.clone())])
            .expect("tokenize");
        assert_eq!(ids, case.ids, "prompt {:?}", case.prompt);
    }
}

fn check_logits(engine: &GemmaEngine, label: &str, exact_rule: ExactBound) {
    for case in fixture().cases {
        let ids: Vec<u32> = case
            .top_ids
            .iter()
            .chain(&case.probe_ids)
            .copied()
            .collect();
        // Full-vocabulary logits go through the quantized head (generation's path); the checked
        // tokens go through the exact rows scoring uses.
        let full = engine.last_logits(&case.ids).expect("forward");
        let exact = engine.last_logits_for(&case.ids, &ids).expect("forward");
        let llama: Vec<f32> = case
            .top_logits
            .iter()
            .chain(&case.probe_logits)
            .copied()
            .collect();
        let max_diff = |want: &[f32]| {
            exact
                .iter()
                .zip(want)
                .map(|(got, w)| (got - w).abs())
                .fold(0f32, f32::max)
        };
        let (vs_llama, vs_exact) = (max_diff(&llama), max_diff(&case.f64_logits));
        // llama.cpp's own distance from the float64 forward on this prompt.
        let reference_error = llama
            .iter()
            .zip(&case.f64_logits)
            .map(|(l, f)| (l - f).abs())
            .fold(0f32, f32::max);
        let exact_bound = exact_rule.bound(reference_error);
        // Triangle inequality: within `exact_bound` of float64, and llama.cpp within its own
        // error of it, puts us within their sum of llama.cpp.
        let llama_bound = exact_bound + reference_error;
        eprintln!(
            "{label}: {} tokens, max |logit diff| vs llama.cpp {vs_llama:.4} (bound {llama_bound:.4}), vs float64 {vs_exact:.4} (bound {exact_bound:.4}; llama.cpp's own {reference_error:.4})",
            case.ids.len()
        );
        assert!(
            vs_exact <= exact_bound,
            "{label}: {vs_exact} from float64 on {:?}, bound {exact_bound}",
            case.prompt
        );
        assert!(
            vs_llama <= llama_bound,
            "{label}: {vs_llama} from llama.cpp on {:?}, bound {llama_bound}",
            case.prompt
        );
        let our_top = full
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(i, _)| i as u32);
        assert_eq!(
            our_top,
            Some(case.top_ids[0]),
            "{label}: top token on {:?}",
            case.prompt
        );
    }
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn dense_logits_match_llama_cpp() {
    check_logits(engine(), "dense", ExactBound::Dense);
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn quantized_logits_match_llama_cpp() {
    let resolved = aegis_engine::resolve(&aegis_engine::ModelSpec::Default, &Default::default())
        .expect("model");
    let options = LoadOptions {
        weight_format: Some(WeightFormat::Quantized),
        ..LoadOptions::default()
    };
    let quantized = GemmaEngine::load(&resolved, &options).expect("load quantized");
    check_logits(&quantized, "quantized", ExactBound::QuantizedLikeLlamaCpp);
}

/// candle picks its quantized kernels by CPU at run time: AVX-512 VNNI, AVX-VNNI, or AVX2 with
/// FMA on x86. `MISTRALRS_FORCE_AVX2=1` (read once per process, so in a child) pins the AVX2 tier,
/// so a machine with a wider tier checks both paths against the same bound. On a CPU whose best
/// tier already is AVX2, the run above is that tier and there is no second one to force.
#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
#[cfg(target_arch = "x86_64")]
fn quantized_logits_match_llama_cpp_on_the_avx2_tier_too() {
    const FORCE_AVX2: &str = "MISTRALRS_FORCE_AVX2";
    let wider_tier = (std::is_x86_feature_detected!("avx512f")
        && std::is_x86_feature_detected!("avx512vnni"))
        || std::is_x86_feature_detected!("avxvnni");
    if std::env::var_os(FORCE_AVX2).is_some() || !wider_tier {
        eprintln!("this CPU's quantized kernels are already the AVX2 tier: nothing to force");
        return;
    }
    let output = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "reference::quantized_logits_match_llama_cpp",
            "--nocapture",
        ])
        .env(FORCE_AVX2, "1")
        .output()
        .expect("run the test binary again");
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    assert!(
        output.status.success(),
        "quantized reference check on the forced AVX2 tier failed:\n{}",
        String::from_utf8_lossy(&output.stdout)
    );
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("1 passed"),
        "the forced run must have run the check"
    );
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn greedy_continuations_match_llama_cpp() {
    let mut compared = 0;
    for case in fixture().cases {
        let ours = engine()
            .greedy_ids(&case.ids, case.greedy.len())
            .expect("greedy");
        for ((got, want), margin) in ours.iter().zip(&case.greedy).zip(&case.greedy_margins) {
            if *margin < GREEDY_MARGIN {
                break;
            }
            assert_eq!(
                got, want,
                "greedy step {compared} on {:?}: {ours:?} vs {:?}",
                case.prompt, case.greedy
            );
            compared += 1;
        }
    }
    assert!(
        compared >= 12,
        "only {compared} unambiguous greedy steps compared"
    );
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn a_multi_token_step_after_a_cached_prefix_matches_one_pass() {
    let case = fixture().cases.remove(3); // the long prompt: crosses the 512-token sliding window
    let model = engine().model();
    let whole = model
        .forward(&case.ids, &mut KvCache::default())
        .expect("whole");
    let mut cache = KvCache::default();
    let split = 600;
    model
        .forward(&case.ids[..split], &mut cache)
        .expect("prefix");
    let snapshot = cache.clone();
    let rest = model.forward(&case.ids[split..], &mut cache).expect("rest");
    let n = case.ids.len() - split;
    let diff = (whole.narrow(0, split, n).expect("narrow") - rest)
        .and_then(|d| d.abs())
        .and_then(|d| d.max_all())
        .and_then(|d| d.to_scalar::<f32>())
        .expect("diff");
    assert!(diff < 1e-3, "chunked prefill differs by {diff}");
    assert_eq!(
        snapshot.len(),
        split,
        "extending a clone must leave the snapshot alone"
    );
    assert_eq!(cache.len(), case.ids.len());
}

trait InfoHash {
    fn info_hash(&self) -> String;
}

impl InfoHash for GemmaEngine {
    fn info_hash(&self) -> String {
        use aegis_engine::LanguageModel;
        self.info().content_hash.clone()
    }
}
