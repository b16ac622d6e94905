//! `aegis model`: fetch a model ahead of time, show what a model name resolves to, write a
//! synthetic model for speed tests, check that two devices compute the same logits, and write a
//! bf16 copy of the sentence encoder.

use std::path::PathBuf;

use aegis_engine::{
    check_devices, default_encoder_dir, synthetic_storage, write_bf16_copy, write_synthetic_gguf,
    GemmaShape, LanguageModel, SyntheticSpec, SYNTHETIC_WARNING,
};
use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

use crate::options::ModelArgs;
use crate::ExitStatus;

#[derive(Debug, clap::Subcommand)]
pub enum ModelCommand {
    /// Resolve (downloading from the hub if needed), load, and print the model's details.
    Info {
        #[command(flatten)]
        model: ModelArgs,
    },
    /// Write a GGUF with a real Gemma 3 size's tensor names and shapes and seeded random weights,
    /// for speed tests where the real weights are not at hand. Its verdicts mean nothing.
    Synth {
        /// tiny, 270m, 1b, 4b, 12b or 27b.
        #[arg(long, default_value = "4b")]
        shape: String,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Storage of the matrices: bf16, f16, f32, q8_0, q4_0 or q4k.
        #[arg(long, default_value = "bf16")]
        dtype: String,
        /// Where to write the .gguf (the Gemma 3 tokenizer is found beside it or in the default
        /// model folder, as for any GGUF).
        #[arg(long)]
        out: PathBuf,
    },
    /// Run one model on the CPU (the reference) and on `--device` with the same token ids, and
    /// check the last-position logits agree within the tolerance stated for the weight format.
    /// Exit status 1 when any prompt disagrees.
    Agree {
        #[command(flatten)]
        model: ModelArgs,
        #[arg(long)]
        json: bool,
    },
    /// Write a copy of the sentence encoder's folder with the transformer's weights in bf16: half
    /// the size, and what a GPU runs anyway. The shipped heads read it (`--encoder OUT`) once its
    /// embeddings of their probe texts match what they recorded.
    EncoderBf16 {
        /// The encoder's folder (default: the one scripts/setup-encoder.sh fills).
        #[arg(long)]
        from: Option<PathBuf>,
        /// Where to write the copy (created; a folder already holding weights is refused).
        out: PathBuf,
    },
}

pub fn run(command: ModelCommand) -> Result<ExitStatus> {
    match command {
        ModelCommand::Info { model } => {
            let engine = model.load()?;
            if engine.info().synthetic {
                eprintln!("warning: {SYNTHETIC_WARNING}");
            }
            println!("{}", serde_json::to_string_pretty(engine.info())?);
            Ok(ExitStatus::Passed)
        }
        ModelCommand::Synth {
            shape,
            seed,
            dtype,
            out,
        } => synth(&shape, seed, &dtype, out),
        ModelCommand::Agree { model, json } => agree(&model, json),
        ModelCommand::EncoderBf16 { from, out } => {
            let from = from.unwrap_or_else(default_encoder_dir);
            let written = write_bf16_copy(&from, &out)
                .with_context(|| format!("copying {} to {}", from.display(), out.display()))?;
            let bytes: u64 = written
                .iter()
                .filter_map(|f| std::fs::metadata(f).ok())
                .map(|m| m.len())
                .sum();
            println!(
                "{}: {} files, {:.2} GiB, transformer weights in bf16",
                out.display(),
                written.len(),
                bytes as f64 / (1u64 << 30) as f64
            );
            Ok(ExitStatus::Passed)
        }
    }
}

fn synth(shape: &str, seed: u64, dtype: &str, out: PathBuf) -> Result<ExitStatus> {
    let spec = SyntheticSpec {
        shape: GemmaShape::named(shape)?,
        seed,
        dtype: synthetic_storage(dtype)?,
    };
    eprintln!("warning: {SYNTHETIC_WARNING}");
    eprintln!(
        "writing a Gemma 3 {}-shaped model ({:.2} billion parameters, {dtype}) to {}",
        spec.shape.name,
        spec.shape.parameters() as f64 / 1e9,
        out.display()
    );
    let progress = ProgressBar::new(spec.shape.tensors().len() as u64);
    progress.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} tensors {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    write_synthetic_gguf(&out, &spec, &mut |done, _| {
        progress.set_position(done as u64)
    })
    .with_context(|| format!("writing {}", out.display()))?;
    progress.finish_and_clear();
    let bytes = std::fs::metadata(&out).map(|m| m.len()).unwrap_or(0);
    println!(
        "{} ({:.2} GiB): SYNTHETIC, verdicts mean nothing",
        out.display(),
        bytes as f64 / (1u64 << 30) as f64
    );
    Ok(ExitStatus::Passed)
}

fn agree(model: &ModelArgs, json: bool) -> Result<ExitStatus> {
    let request = model.request()?;
    let resolved = request.resolve()?;
    let report = check_devices(&resolved, &request.options)
        .with_context(|| format!("checking {} on {}", resolved.id, model.device))?;
    let passed = report.passed();
    if json {
        let mut out = serde_json::to_value(&report)?;
        out["passed"] = passed.into();
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!(
            "{}: {} {} against {} {}",
            report.model,
            report.candidate.device,
            report.candidate.weights,
            report.reference.device,
            report.reference.weights
        );
        println!(
            "{:<8} {:>6} {:>12} {:>12} {:>10} {:>10} {:>10} {:>5}  result",
            "prompt",
            "tokens",
            "max |diff|",
            "max |logit|",
            "relative",
            "cpu same",
            "tolerance",
            "top1"
        );
        for r in &report.prompts {
            let own = r
                .cpu_same_format_relative
                .map_or("—".to_string(), |x| format!("{x:.2e}"));
            println!(
                "{:<8} {:>6} {:>12.5} {:>12.3} {:>10.2e} {:>10} {:>10.1e} {:>5}  {}",
                r.label,
                r.tokens,
                r.max_abs_diff,
                r.max_abs_reference,
                r.relative,
                own,
                r.tolerance,
                if r.same_top_token { "same" } else { "diff" },
                if r.passes() { "pass" } else { "FAIL" }
            );
        }
        println!("{}", if passed { "agree" } else { "DISAGREE" });
        if report.synthetic {
            eprintln!("note: {SYNTHETIC_WARNING} (agreement still holds for its arithmetic)");
        }
    }
    Ok(if passed {
        ExitStatus::Passed
    } else {
        ExitStatus::Failed
    })
}
