//! The residual stream below the adapted layers, read once per text: the lower layers never
//! change, so every epoch (and every later run on the same texts) starts from these. Held in
//! bfloat16, half the memory of f32 (about 1 GB for the shipped training data), and cached on
//! disk keyed by the encoder, the layer and the texts.

use std::path::{Path, PathBuf};
use std::time::Instant;

use aegis_engine::EmbeddingGemma;
use candle_core::{DType, Device, Tensor};
use sha2::{Digest, Sha256};

use crate::error::{AdaptError, Result};

/// Each text's states, `[tokens, hidden]` in bf16; `None` for a text that could not be read
/// (too long for the encoder) or is longer than training reads.
pub struct TokenStates {
    pub states: Vec<Option<Tensor>>,
}

const CHUNK: usize = 64;

/// Names a folder for cached states instead of `aegis/adapt` in the user's cache folder.
pub const STATES_CACHE_ENV: &str = "AEGIS_ADAPT_CACHE";

/// Where states for this encoder, layer and list of texts are cached.
pub fn cache_path(encoder_hash: &str, after: usize, texts: &[&str]) -> Option<PathBuf> {
    let mut digest = Sha256::new();
    for text in texts {
        digest.update((text.len() as u64).to_le_bytes());
        digest.update(text.as_bytes());
    }
    let digest: String = digest.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let encoder: String = encoder_hash.chars().take(16).collect();
    cache_folder().map(|f| f.join(format!("{encoder}-after{after}-{digest}.safetensors")))
}

/// The folder states are cached in ([`STATES_CACHE_ENV`], else `aegis/adapt` in the user's cache
/// folder), where training's log goes too.
pub fn cache_folder() -> Option<PathBuf> {
    match std::env::var_os(STATES_CACHE_ENV) {
        Some(folder) => Some(PathBuf::from(folder)),
        None => dirs::cache_dir().map(|d| d.join("aegis").join("adapt")),
    }
}

/// The states after layer `after` (1 = the first) of every text, from the cache when it has them;
/// texts over `max_tokens` are left out. `progress` hears (done, total) as chunks finish.
pub fn read_states(
    encoder: &EmbeddingGemma,
    texts: &[&str],
    after: usize,
    max_tokens: usize,
    cache: Option<&Path>,
    mut progress: impl FnMut(usize, usize),
) -> Result<TokenStates> {
    if let Some(path) = cache.filter(|p| p.exists()) {
        match load(path, texts.len(), max_tokens) {
            Ok(states) => return Ok(states),
            Err(error) => {
                tracing::warn!(%error, path = %path.display(), "ignoring the cached states")
            }
        }
    }
    let started = Instant::now();
    // Texts too long to train on are left out before their layers run: the longest cost the
    // most (attention grows with the square of their length).
    let fits: Vec<bool> = texts
        .iter()
        .map(|t| encoder.tokens(t).is_ok_and(|ids| ids.len() <= max_tokens))
        .collect();
    let kept: Vec<&str> = texts
        .iter()
        .zip(&fits)
        .filter_map(|(t, &fits)| fits.then_some(*t))
        .collect();
    let mut read = Vec::with_capacity(kept.len());
    for (index, chunk) in kept.chunks(CHUNK).enumerate() {
        for state in encoder.token_states(chunk, after) {
            read.push(Some(state?.to_dtype(DType::BF16)?));
        }
        progress(((index + 1) * CHUNK).min(kept.len()), kept.len());
    }
    let mut read = read.into_iter();
    let states = fits
        .iter()
        .map(|&fits| if fits { read.next().flatten() } else { None })
        .collect();
    tracing::info!(
        texts = texts.len(),
        elapsed_s = started.elapsed().as_secs(),
        "token states read"
    );
    let states = TokenStates { states };
    if let Some(path) = cache {
        if let Err(error) = save(&states, path) {
            tracing::warn!(%error, path = %path.display(), "could not cache the states");
        }
    }
    Ok(states)
}

/// One tensor of every row and one of each text's length (0 for a text left out).
fn save(states: &TokenStates, path: &Path) -> Result<()> {
    let present: Vec<&Tensor> = states.states.iter().flatten().collect();
    let lengths: Vec<u32> = states
        .states
        .iter()
        .map(|s| s.as_ref().map_or(Ok(0), |s| s.dim(0).map(|n| n as u32)))
        .collect::<candle_core::Result<_>>()?;
    let rows = Tensor::cat(&present, 0)?;
    let lengths = Tensor::new(lengths.as_slice(), &Device::Cpu)?;
    let bytes = safetensors::serialize([("rows", &rows), ("lengths", &lengths)], None)
        .map_err(|e| AdaptError::Invalid(e.to_string()))?;
    aegis_files::write_atomically(path, &bytes).map_err(|e| AdaptError::Invalid(e.to_string()))
}

fn load(path: &Path, texts: usize, max_tokens: usize) -> Result<TokenStates> {
    let mut tensors = candle_core::safetensors::load(path, &Device::Cpu)?;
    let missing = || AdaptError::Invalid("not a states file".into());
    let rows = tensors.remove("rows").ok_or_else(missing)?;
    let lengths: Vec<u32> = tensors.remove("lengths").ok_or_else(missing)?.to_vec1()?;
    if lengths.len() != texts {
        return Err(AdaptError::Invalid(format!(
            "{} texts cached, {texts} asked for",
            lengths.len()
        )));
    }
    let mut at = 0;
    let mut states = Vec::with_capacity(texts);
    for length in lengths {
        let length = length as usize;
        states.push(if length == 0 || length > max_tokens {
            None
        } else {
            Some(rows.narrow(0, at, length)?)
        });
        at += length;
    }
    Ok(TokenStates { states })
}
