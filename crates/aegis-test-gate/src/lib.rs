//! Real-model tests need the default model and encoder, which `scripts/setup-model.sh` and
//! `scripts/setup-encoder.sh` cache outside the clone. A crate with such tests calls [`emit`] from
//! its build script and marks each of them
//! `#[cfg_attr(not(aegis_models), ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh")]`:
//! plain `cargo test` on a fresh checkout then runs every other test and lists these as ignored,
//! with the reason, instead of panicking in them. `scripts/test.sh` sets
//! [`REQUIRE_MODELS_ENV`], so there a missing model fails the build rather than skipping a test.

use std::path::{Path, PathBuf};

/// Set (to anything) where a missing model must fail the build: the whole suite, CI.
pub const REQUIRE_MODELS_ENV: &str = "AEGIS_REQUIRE_MODELS";

/// The folders the engine reads the default model and encoder from, and the files each must hold
/// (the engine's own lookup: the variable, else the cache folder the setup scripts fill).
const MODELS: [(&str, &str, &[&str]); 2] = [
    (
        "AEGIS_MODEL_DIR",
        "gemma-3-270m",
        &["gemma-3-270m-q4_k_m.gguf", "tokenizer.json"],
    ),
    (
        "AEGIS_ENCODER_DIR",
        "embeddinggemma-300m",
        &["model.safetensors", "tokenizer.json", "config.json"],
    ),
];

/// Prints the build-script lines: the `aegis_models` cfg when both models are set up, and what
/// makes cargo run the script again (the variables, the files appearing).
pub fn emit() {
    println!("cargo::rustc-check-cfg=cfg(aegis_models)");
    println!("cargo::rerun-if-env-changed={REQUIRE_MODELS_ENV}");
    let mut missing = Vec::new();
    for (variable, name, files) in MODELS {
        println!("cargo::rerun-if-env-changed={variable}");
        let dir = model_dir(variable, name);
        watch(&dir);
        missing.extend(files.iter().map(|f| dir.join(f)).filter(|p| !p.is_file()));
    }
    if missing.is_empty() {
        println!("cargo::rustc-cfg=aegis_models");
        return;
    }
    let listed: Vec<String> = missing.iter().map(|p| p.display().to_string()).collect();
    if std::env::var_os(REQUIRE_MODELS_ENV).is_some() {
        panic!(
            "{REQUIRE_MODELS_ENV} is set but the models are not set up (missing {}): run scripts/setup-model.sh and scripts/setup-encoder.sh",
            listed.join(", ")
        );
    }
    println!(
        "cargo::warning=the default model or encoder is not set up ({} missing): the tests that need them are ignored; scripts/test.sh sets them up and runs everything",
        listed.join(", ")
    );
}

/// Has cargo run the build script again when the model's folder changes (a setup script filling
/// it). A path that does not exist would rerun it, and rebuild the crate, on every build, so a
/// missing folder is watched through its parent, made if need be: cargo notices a folder's
/// files by their times, and the models' cache folder holds nothing else.
fn watch(dir: &Path) {
    let watched = if dir.is_dir() {
        Some(dir)
    } else {
        dir.parent()
            .filter(|parent| std::fs::create_dir_all(parent).is_ok())
    };
    if let Some(path) = watched {
        println!("cargo::rerun-if-changed={}", path.display());
    }
}

fn model_dir(variable: &str, name: &str) -> PathBuf {
    match std::env::var_os(variable) {
        Some(dir) => PathBuf::from(dir),
        None => dirs::cache_dir()
            .unwrap_or_else(std::env::temp_dir)
            .join("aegis")
            .join("models")
            .join(name),
    }
}
