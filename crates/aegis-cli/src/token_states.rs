//! `aegis token-states`: every message's token states after the encoder's last layer and final
//! norm, written for research on a learned pooling (issue 64 item 3: read who is addressed
//! rather than average every token). Research: built with the `lab` feature.

use std::path::{Path, PathBuf};
use std::time::Instant;

use aegis_engine::{
    default_encoder_dir, DeviceChoice, EmbeddingGemma, EncoderArithmetic, SentenceEncoder,
};
use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};

use crate::ExitStatus;

#[derive(Debug, clap::Args)]
pub struct TokenStatesArgs {
    /// Messages (`.jsonl` with a `text` field, `.txt`, `.csv`), repeatable: one states file each,
    /// named after it.
    #[arg(long, required = true)]
    pub data: Vec<PathBuf>,
    /// The folder the states files are written to.
    #[arg(long)]
    pub out: PathBuf,
    /// The encoder's sentence-transformers folder (default: where scripts/setup-encoder.sh puts it).
    #[arg(long)]
    pub encoder: Option<PathBuf>,
}

/// Texts read at once: progress is printed after each chunk.
const CHUNK: usize = 64;

pub fn run(args: TokenStatesArgs) -> Result<ExitStatus> {
    let folder = match args.encoder {
        Some(folder) => folder,
        None => default_encoder_dir(),
    };
    // The precise kernels (bf16, never int8), as the shipped heads' features are read.
    let encoder = EmbeddingGemma::load_with(&folder, DeviceChoice::Cpu, EncoderArithmetic::Precise)
        .with_context(|| format!("loading the encoder from {}", folder.display()))?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let (dense, normalize) = encoder.projections();
    for data in &args.data {
        let stem = data
            .file_stem()
            .and_then(|s| s.to_str())
            .with_context(|| format!("{} has no usable name", data.display()))?;
        let path = args.out.join(format!("{stem}.safetensors"));
        if path.exists() {
            eprintln!("{} exists: kept", path.display());
            continue;
        }
        let texts = read_texts(data)?;
        let started = Instant::now();
        let mut rows = Vec::new();
        let mut lengths = Vec::with_capacity(texts.len());
        for (index, chunk) in texts.chunks(CHUNK).enumerate() {
            let chunk: Vec<&str> = chunk.iter().map(String::as_str).collect();
            for state in encoder.final_token_states(&chunk) {
                match state {
                    Ok(state) => {
                        lengths.push(state.dim(0)? as u32);
                        rows.push(state.to_dtype(DType::F16)?);
                    }
                    // A text the encoder refuses (too long) is kept as length 0.
                    Err(error) => {
                        tracing::warn!(%error, "a text left out");
                        lengths.push(0);
                    }
                }
            }
            let done = ((index + 1) * CHUNK).min(texts.len());
            eprintln!(
                "{stem}: {done}/{} texts, {} s",
                texts.len(),
                started.elapsed().as_secs()
            );
        }
        if rows.is_empty() {
            bail!("{} has no text the encoder could read", data.display());
        }
        let states = Tensor::cat(&rows, 0)?;
        let lengths = Tensor::new(lengths.as_slice(), &Device::Cpu)?;
        let mut tensors = vec![
            ("states".to_string(), states),
            ("lengths".to_string(), lengths),
        ];
        for (i, weight) in dense.iter().enumerate() {
            tensors.push((format!("projection.{i}"), weight.to_dtype(DType::F32)?));
        }
        let normalize = Tensor::new(&[u8::from(normalize)], &Device::Cpu)?;
        tensors.push(("normalize".to_string(), normalize));
        let bytes = safetensors::serialize(tensors.iter().map(|(n, t)| (n.as_str(), t)), None)
            .context("serializing the states")?;
        aegis_files::write_atomically(&path, &bytes)
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!(
            "{}: {} texts of {} ({}; {})",
            path.display(),
            texts.len(),
            data.display(),
            encoder.info().weight_format,
            encoder.info().content_hash
        );
    }
    Ok(ExitStatus::Passed)
}

/// Every message of the file, in order, as `aegis import` reads it (`.jsonl` with `text`, `.txt`,
/// `.csv`); a row that cannot be read stops the file before any state is written.
fn read_texts(path: &Path) -> Result<Vec<String>> {
    let rows = aegis_import::read_rows(path, None)?;
    rows.iter()
        .map(|row| match row.text() {
            Ok(text) => Ok(text.to_string()),
            Err(problem) => bail!("{}:{}: {problem}", path.display(), row.line),
        })
        .collect()
}
