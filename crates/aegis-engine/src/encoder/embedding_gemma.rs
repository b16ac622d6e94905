//! EmbeddingGemma as its sentence-transformers folder describes it: a bidirectional Gemma 3
//! (`config.json`, `model.safetensors`), mean pooling over every token (`1_Pooling`), dense
//! projections (`2_Dense`, `3_Dense`), then L2 normalisation. The model card's task prompt for
//! classification goes before the message; the tokenizer adds `<bos>` and `<eos>`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use candle_core::{DType, Tensor, D};

use super::arithmetic::EncoderArithmetic;
use super::sentence_modules::SentenceModules;
use super::{EncoderAdapter, EncoderInfo, EncoderOutput, EncoderReading, SentenceEncoder};
use crate::cost::{encoder_flops, ComputePlan};
use crate::engine::batch_or_one_by_one;
use crate::error::{EngineError, Result};
use crate::load_options::DeviceChoice;
use crate::model::{CpuEncoder, EmbeddingStorage, Gemma3, WeightFormat};
use crate::source::WeightFiles;
use crate::tokenizer::GemmaTokenizer;

/// Rows run through the layers at once on the CPU: keeps attention scratch bounded while the
/// matrix products stay large enough to run near the machine's GEMM rate.
const BATCH_TOKENS: usize = 256;

/// On a GPU: a batch's cost there is its launches, nearly the same for 30 rows as for 8,000,
/// so the worker's whole batch (up to 32 messages of 16 KiB together) goes through at once.
const GPU_BATCH_TOKENS: usize = 8192;

/// The transformer under the pooling: candle's forward pass, or the packed CPU kernels.
enum Backbone {
    Candle(Gemma3),
    Kernels(CpuEncoder),
}

impl Backbone {
    fn config(&self) -> &crate::config::Gemma3Config {
        match self {
            Self::Candle(model) => model.config(),
            Self::Kernels(model) => model.config(),
        }
    }

    fn forward_independent_taps(&self, batch: &[&[u32]], taps: &[usize]) -> Result<Vec<Tensor>> {
        match self {
            Self::Candle(model) => model.forward_independent_taps(batch, taps),
            Self::Kernels(model) => model.forward_independent_taps(batch, taps),
        }
    }

    fn final_normed(&self, residual: &Tensor) -> Result<Tensor> {
        match self {
            Self::Candle(model) => model.final_normed(residual),
            Self::Kernels(model) => model.final_normed(residual),
        }
    }
}

pub struct EmbeddingGemma {
    model: Backbone,
    tokenizer: GemmaTokenizer,
    /// Projections after pooling, `[out, in]` each, applied in order.
    dense: Vec<Tensor>,
    normalize: bool,
    info: EncoderInfo,
}

impl std::fmt::Debug for EmbeddingGemma {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddingGemma")
            .field("info", &self.info)
            .finish()
    }
}

impl EmbeddingGemma {
    /// Loads the folder on `device`. Every module it lists must be one we implement as
    /// sentence-transformers does; anything else is refused rather than approximated.
    pub fn load(folder: &Path, device: DeviceChoice) -> Result<Self> {
        Self::load_with(folder, device, EncoderArithmetic::Fast)
    }

    /// [`Self::load`] with the arithmetic chosen.
    pub fn load_with(
        folder: &Path,
        device: DeviceChoice,
        arithmetic: EncoderArithmetic,
    ) -> Result<Self> {
        Self::load_adapted(folder, device, arithmetic, None)
    }

    /// [`Self::load_with`], with an adapter's updates (see [`EncoderAdapter`]) added to the
    /// layers before they are packed: the adapted encoder runs at the plain one's cost, and its
    /// content hash covers the adapter file, so heads and cached features bind to the pair.
    pub fn load_adapted(
        folder: &Path,
        device: DeviceChoice,
        arithmetic: EncoderArithmetic,
        adapter: Option<&Path>,
    ) -> Result<Self> {
        // The tokenizer's parse (about a second of a 33 MB JSON) runs beside the weights' read
        // and packing.
        let tokenizer_path = folder.join("tokenizer.json");
        std::thread::scope(|scope| {
            let tokenizer = scope.spawn(|| GemmaTokenizer::from_file(&tokenizer_path));
            Self::load_beside(folder, device, arithmetic, adapter, || {
                tokenizer
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
        })
    }

    /// [`Self::load_adapted`]'s work, taking the tokenizer from `tokenizer` once the weights are
    /// in.
    fn load_beside(
        folder: &Path,
        device: DeviceChoice,
        arithmetic: EncoderArithmetic,
        adapter: Option<&Path>,
        tokenizer: impl FnOnce() -> Result<GemmaTokenizer>,
    ) -> Result<Self> {
        let started = Instant::now();
        let (device, device_name) = device.open()?;
        let SentenceModules {
            dense,
            dense_files,
            normalize,
            prompt,
        } = SentenceModules::read(folder, &device)?;
        let mut weight_files = vec![folder.join("model.safetensors")];
        weight_files.extend(dense_files);
        let weights = WeightFiles::Safetensors {
            config: folder.join("config.json"),
            shards: vec![folder.join("model.safetensors")],
        };
        // Layers in f32 (CPU GEMM); on CPU the embedding, most of the memory, in 8-bit blocks
        // (the README's measurement: with bf16 rows the encoder beside the decoder peaked just
        // over 1.5 GiB).
        let format = WeightFormat::best_for(&device);
        let embedding = if device.is_cpu() {
            EmbeddingStorage::Q8_0
        } else {
            EmbeddingStorage::Dense(format.activation_dtype())
        };
        let mut model = Gemma3::load_encoder(&weights, format, embedding, &device)?;
        if let Some(path) = adapter {
            // Only an adapted load needs the plain encoder's hash apart from its own.
            let base_hash = crate::hash::files_sha256(&weight_files)?;
            let adapter = EncoderAdapter::read(path)?;
            if adapter.base_hash != base_hash {
                return Err(EngineError::invalid(
                    path,
                    format!(
                        "trained on encoder {}, not this one ({base_hash})",
                        adapter.base_hash
                    ),
                ));
            }
            for ((layer, projection), update) in &adapter.updates {
                model.add_to_projection(*layer, *projection, &adapter.delta(update)?)?;
            }
            weight_files.push(path.to_path_buf());
        }
        let (model, layers_format) = if let Some(kernel) = arithmetic.layer_kernel(&device) {
            let packed = CpuEncoder::pack(model, kernel)?;
            let mut name = format!("{} layers ({} kernels)", kernel.weights(), kernel.name());
            if kernel.quantized() {
                // The block size and attention's bf16 kind (AMX tiles or AVX-512 BF16 beside the
                // same int8 layers) decide the numbers: cached features key by them.
                name += &format!(
                    ", blocks of {}, attention on {}",
                    aegis_kernels::INT8_BLOCK,
                    kernel.for_attention().name()
                );
            }
            (Backbone::Kernels(packed), name)
        } else {
            (Backbone::Candle(model), format!("{} layers", format.name()))
        };
        let hidden = model.config().hidden_size;
        let dimensions = dense.iter().try_fold(hidden, |width, weight| {
            let (out, inp) = weight.dims2()?;
            if inp == width {
                Ok(out)
            } else {
                Err(EngineError::invalid(
                    folder,
                    format!("a dense layer takes {inp} inputs after {width}"),
                ))
            }
        })?;
        let info = EncoderInfo {
            id: folder_id(folder),
            content_hash: crate::hash::files_sha256(&weight_files)?,
            prompt,
            dimensions,
            context_length: model.config().context_length,
            layers: model.config().num_layers,
            device: device_name,
            // The reach names the attention read (it changed once: cached features keyed by
            // this string are then computed again).
            weight_format: format!(
                "{layers_format}, {embedding:?} embedding, window ±{}",
                model.config().sliding_window - 1
            ),
            matches_weights: None,
        };
        let tokenizer = tokenizer()?;
        tracing::info!(encoder = %info.id, elapsed_ms = started.elapsed().as_millis() as u64, "encoder loaded");
        Ok(Self {
            model,
            tokenizer,
            dense,
            normalize,
            info,
        })
    }

    /// See [`EncoderInfo::accept_as`]: a copy whose files hash otherwise (bf16) but that embeds
    /// the heads' probes as they recorded.
    pub fn accept_as(&mut self, content_hash: &str) {
        self.info.accept_as(content_hash);
    }

    /// The tokens the encoder reads for `text`: `<bos>`, the task prompt, the text as user text
    /// (control-token spellings stay text), `<eos>`.
    pub fn tokens(&self, text: &str) -> Result<Vec<u32>> {
        super::encoder_tokens(&self.tokenizer, &self.info, text)
    }

    pub fn config(&self) -> &crate::config::Gemma3Config {
        self.model.config()
    }

    /// The residual stream after layer `after` (1 = the first) of each text, `[tokens, hidden]`
    /// in f32: what an adapter of the layers above it trains on, read once.
    pub fn token_states(&self, texts: &[&str], after: usize) -> Vec<Result<Tensor>> {
        self.states_after(texts, after, false)
    }

    /// Each text's token states after the last layer and the final norm, `[tokens, hidden]` in
    /// f32: what the sentence embedding's mean pooling reads, for a learned pooling to read
    /// instead.
    pub fn final_token_states(&self, texts: &[&str]) -> Vec<Result<Tensor>> {
        self.states_after(texts, self.model.config().num_layers, true)
    }

    fn states_after(&self, texts: &[&str], after: usize, normed: bool) -> Vec<Result<Tensor>> {
        let inputs = texts.iter().map(|t| self.tokens(t)).collect();
        batch_or_one_by_one(inputs, "texts", |inputs| {
            let mut out = Vec::with_capacity(inputs.len());
            for batch in token_batches(inputs, self.batch_tokens()) {
                let stream = self.model.forward_independent_taps(&batch, &[after])?;
                let stream = if normed {
                    self.model.final_normed(&stream[0])?
                } else {
                    stream[0].clone()
                };
                let stream = stream.to_dtype(DType::F32)?;
                let mut at = 0;
                for sequence in &batch {
                    out.push(stream.narrow(0, at, sequence.len())?.contiguous()?);
                    at += sequence.len();
                }
            }
            Ok(out)
        })
    }

    /// Layer `index`'s weights (0 = the first) and, after the last, the final norm's weight:
    /// the frozen part of an adapter's training. Only the candle backbone keeps its layers as
    /// tensors: load with [`EncoderArithmetic::Exact`].
    pub fn layer_weights(&self, index: usize) -> Result<crate::model::LayerWeights> {
        self.candle_backbone()?.layer_weights(index)
    }

    pub fn final_norm_weight(&self) -> Result<Tensor> {
        self.candle_backbone()?.final_norm_weight()
    }

    fn candle_backbone(&self) -> Result<&Gemma3> {
        match &self.model {
            Backbone::Candle(model) => Ok(model),
            Backbone::Kernels(_) => Err(EngineError::Unsupported(
                "layer weights from the packed kernels (load with exact arithmetic)",
            )),
        }
    }

    /// The projections after pooling (`[out, in]`, in order) and whether the result is
    /// L2-normalised.
    pub fn projections(&self) -> (&[Tensor], bool) {
        (&self.dense, self.normalize)
    }

    /// Whether the layers run on a GPU, where a batch costs launches rather than arithmetic.
    fn on_gpu(&self) -> bool {
        matches!(&self.model, Backbone::Candle(model) if !model.device().is_cpu())
    }

    /// Rows read at once: [`BATCH_TOKENS`] on the CPU, [`GPU_BATCH_TOKENS`] on a GPU.
    fn batch_tokens(&self) -> usize {
        if self.on_gpu() {
            GPU_BATCH_TOKENS
        } else {
            BATCH_TOKENS
        }
    }

    /// Readings of already tokenised inputs, in batches of [`Self::batch_tokens`] rows.
    fn read_tokens(
        &self,
        inputs: &[Vec<u32>],
        reading: &EncoderReading,
    ) -> Result<Vec<EncoderOutput>> {
        let batches = token_batches(inputs, self.batch_tokens());
        // On the kernels, batches run side by side, a thread each: a batch's steps between its
        // products (norms, attention's copies, quantizing) run on one thread, so one batch at
        // a time left the second core idle for a fifth of the time. Its products still split
        // between idle threads. A text's numbers do not depend on the batch it is read in.
        let read: Vec<Result<Vec<EncoderOutput>>> = if matches!(self.model, Backbone::Kernels(_)) {
            use rayon::prelude::*;
            batches
                .par_iter()
                .map(|batch| self.read_together(batch, reading))
                .collect()
        } else {
            batches
                .iter()
                .map(|batch| self.read_together(batch, reading))
                .collect()
        };
        let mut out = Vec::with_capacity(inputs.len());
        for batch in read {
            out.extend(batch?);
        }
        Ok(out)
    }

    fn read_together(
        &self,
        batch: &[&[u32]],
        reading: &EncoderReading,
    ) -> Result<Vec<EncoderOutput>> {
        let last = self.model.config().num_layers;
        let mut taps = reading.layers.clone();
        if (reading.embedding || reading.token_states) && !taps.contains(&last) {
            taps.push(last);
        }
        let streams = self.model.forward_independent_taps(batch, &taps)?;
        // On a GPU, one product with an averaging matrix instead of a launch or two a text.
        let on_gpu = self.on_gpu();
        let averaging = if on_gpu {
            let rows: usize = batch.iter().map(|s| s.len()).sum();
            let mut weights = vec![0f32; batch.len() * rows];
            let mut at = 0;
            for (i, sequence) in batch.iter().enumerate() {
                let share = 1.0 / sequence.len() as f32;
                weights[i * rows + at..i * rows + at + sequence.len()].fill(share);
                at += sequence.len();
            }
            let device = streams[0].device();
            Some(Tensor::from_vec(weights, (batch.len(), rows), device)?)
        } else {
            None
        };
        // Mean over each sequence's rows: `[n, hidden]` per tap.
        let pooled = |stream: &Tensor| -> Result<Tensor> {
            let stream = stream.to_dtype(DType::F32)?;
            if let Some(averaging) = &averaging {
                return Ok(averaging.matmul(&stream)?);
            }
            let mut means = Vec::with_capacity(batch.len());
            let mut at = 0;
            for sequence in batch {
                means.push(stream.narrow(0, at, sequence.len())?.mean(0)?);
                at += sequence.len();
            }
            Ok(Tensor::stack(&means, 0)?)
        };
        let mut outputs = vec![EncoderOutput::default(); batch.len()];
        for stream in &streams[..reading.layers.len()] {
            for (output, mean) in outputs.iter_mut().zip(pooled(stream)?.to_vec2()?) {
                output.layer_means.push(mean);
            }
        }
        let at_last = taps.iter().position(|&t| t == last);
        let final_normed = match at_last {
            Some(at) if reading.embedding || reading.token_states => {
                Some(self.model.final_normed(&streams[at])?)
            }
            _ => None,
        };
        if let (true, Some(states)) = (reading.token_states, &final_normed) {
            let states = states.to_dtype(DType::F32)?;
            let mut at = 0;
            for (output, sequence) in outputs.iter_mut().zip(batch) {
                // Each text's tokens alone, as its embedding's projections are: a text's numbers
                // must not depend on the batch it was read in.
                let mut x = states.narrow(0, at, sequence.len())?;
                for weight in &self.dense {
                    x = x.matmul(&weight.t()?)?;
                }
                output.token_states = Some(x.flatten_all()?.to_vec1()?);
                at += sequence.len();
            }
        }
        if let (true, Some(final_normed)) = (reading.embedding, &final_normed) {
            let pooled = pooled(final_normed)?;
            // Each text's projections alone: a matrix product's blocking follows its row count,
            // and a text's embedding must not depend on the batch it was read in (cached
            // features, bit-for-bit retraining). Two vector-matrix products a text cost nothing
            // beside its layers.
            // On a GPU results already vary with the batch in their last digits (cuBLAS picks its
            // kernels by shape), and launches are the cost: one product for the batch.
            let mut x = if on_gpu {
                let mut x = pooled;
                for weight in &self.dense {
                    x = x.matmul(&weight.t()?)?;
                }
                x
            } else {
                let mut projected = Vec::with_capacity(batch.len());
                for row in 0..batch.len() {
                    let mut x = pooled.narrow(0, row, 1)?;
                    for weight in &self.dense {
                        x = x.matmul(&weight.t()?)?;
                    }
                    projected.push(x);
                }
                Tensor::cat(&projected, 0)?
            };
            if self.normalize {
                let norm = x.sqr()?.sum_keepdim(D::Minus1)?.sqrt()?;
                x = x.broadcast_div(&norm.maximum(1e-12)?)?;
            }
            for (output, embedding) in outputs.iter_mut().zip(x.to_vec2()?) {
                output.embedding = Some(embedding);
            }
        }
        Ok(outputs)
    }
}

impl SentenceEncoder for EmbeddingGemma {
    fn info(&self) -> &EncoderInfo {
        &self.info
    }

    fn read_batch(&self, texts: &[&str], reading: &EncoderReading) -> Vec<Result<EncoderOutput>> {
        if reading.is_empty() {
            return texts.iter().map(|_| Ok(EncoderOutput::default())).collect();
        }
        if let Some(&layer) = reading
            .layers
            .iter()
            .find(|&&l| l == 0 || l > self.info.layers)
        {
            return texts
                .iter()
                .map(|_| {
                    Err(EngineError::UnknownLayer {
                        layer,
                        layers: self.info.layers,
                    })
                })
                .collect();
        }
        let started = std::time::Instant::now();
        let inputs = texts.iter().map(|t| self.tokens(t)).collect();
        // On a GPU a short text's tokens are a tenth of its share of a batch (43 us on a Zen 4
        // against about 430 on an H100): worth watching beside the batch log.
        tracing::debug!(
            texts = texts.len(),
            ms = started.elapsed().as_secs_f64() * 1e3,
            "encoder tokenised"
        );
        batch_or_one_by_one(inputs, "texts", |batch| self.read_tokens(batch, reading))
    }

    fn plan(&self, text: &str, reading: &EncoderReading) -> Result<ComputePlan> {
        let tokens = self.tokens(text)?.len();
        let depth = reading.depth(self.info.layers);
        Ok(ComputePlan {
            prompt_tokens: tokens,
            computed_tokens: if depth == 0 { 0 } else { tokens },
            flops: encoder_flops(self.model.config(), tokens, depth),
        })
    }

    fn matmul_gflops(&self, duration: std::time::Duration) -> Option<f64> {
        match &self.model {
            Backbone::Kernels(model) => Some(model.matmul_gflops(duration)),
            // candle's GEMM is the decoder's: the engine measures it.
            Backbone::Candle(_) => None,
        }
    }
}

/// Consecutive inputs in batches of about `limit` rows (a longer input alone).
fn token_batches(inputs: &[Vec<u32>], limit: usize) -> Vec<Vec<&[u32]>> {
    let mut batches = Vec::new();
    let mut start = 0;
    while start < inputs.len() {
        let mut end = start + 1;
        let mut rows = inputs[start].len();
        while end < inputs.len() && rows + inputs[end].len() <= limit {
            rows += inputs[end].len();
            end += 1;
        }
        batches.push(inputs[start..end].iter().map(Vec::as_slice).collect());
        start = end;
    }
    batches
}

/// `embeddinggemma-300m` for the default folder, else the folder's (or hub repo's) name.
fn folder_id(folder: &Path) -> String {
    let name = |p: &Path| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    // A hub snapshot is `models--owner--name/snapshots/<commit>`.
    let repo = folder
        .parent()
        .and_then(Path::parent)
        .map(name)
        .and_then(|n| n.strip_prefix("models--").map(|r| r.replace("--", "/")));
    repo.unwrap_or_else(|| name(&PathBuf::from(folder)))
}
