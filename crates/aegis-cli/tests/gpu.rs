//! The GPU issue's tools through the real binary: a synthetic model is written, loads, and says
//! loudly that its verdicts mean nothing; `model agree` compares formats; a CPU build asked for a
//! GPU says how to get one.

use super::{aegis, stderr, stdout};

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn a_synthetic_model_is_written_checked_and_flagged_everywhere() {
    let dir = tempfile::tempdir().expect("tempdir");
    let model = dir.path().join("tiny.gguf");
    let model = model.to_str().expect("utf-8 path");
    let out = aegis(&[
        "model", "synth", "--shape", "tiny", "--dtype", "q8_0", "--out", model,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("SYNTHETIC"), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("verdicts mean nothing"),
        "{}",
        stderr(&out)
    );

    // Alone (no encoder beside it), the model is dequantized to f32 on the CPU.
    let out = aegis(&[
        "check",
        "--model",
        model,
        "--encoder",
        "decoder",
        "hello there",
    ]);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("on cpu, f32 weights"), "{text}");
    assert!(text.contains("SYNTHETIC MODEL"), "{text}");

    let out = aegis(&[
        "model",
        "agree",
        "--model",
        model,
        "--device",
        "cpu",
        "--weights",
        "bf16",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(report["passed"], true);
    assert_eq!(report["synthetic"], true);
    assert_eq!(report["candidate"]["weights"], "bf16");
    assert_eq!(report["reference"]["weights"], "f32");
    let prompts = report["prompts"].as_array().expect("prompts");
    assert_eq!(prompts.len(), 3);
    // The long prompt runs past the tiny shape's 16-token sliding window.
    assert!(prompts[2]["tokens"].as_u64().unwrap_or(0) > 16);
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn unknown_shapes_and_storage_types_are_usage_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out_path = dir.path().join("x.gguf");
    let out_path = out_path.to_str().expect("utf-8 path");
    let out = aegis(&["model", "synth", "--shape", "3b", "--out", out_path]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("270m, 1b, 4b"), "{}", stderr(&out));
    let out = aegis(&[
        "model", "synth", "--shape", "tiny", "--dtype", "int3", "--out", out_path,
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("bf16"), "{}", stderr(&out));
    assert!(!dir.path().join("x.gguf").exists());
}

#[cfg(not(feature = "cuda"))]
#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn a_cpu_build_asked_for_a_gpu_names_the_fix() {
    let out = aegis(&["check", "--device", "cuda:0", "hello"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--features cuda"), "{}", stderr(&out));
}
