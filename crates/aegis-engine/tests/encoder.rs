//! EmbeddingGemma through the real loading code against the NumPy oracle (fixture written by
//! scripts/reference/embeddinggemma_reference.py, which first reproduced the model card's
//! sentence-transformers example digit for digit). The README's test command fetches the encoder
//! first (scripts/setup-encoder.sh); a missing encoder fails, never skips.

use std::sync::OnceLock;

use aegis_engine::{
    default_encoder_dir, DeviceChoice, EmbeddingGemma, EncoderArithmetic, EncoderReading,
    EngineError, SentenceEncoder,
};
use serde::Deserialize;

#[derive(Deserialize)]
struct Fixture {
    prompt: String,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    text: String,
    ids: Vec<u32>,
    embedding: Vec<f64>,
    float32_max_abs_error: f64,
    max_abs_element: f64,
}

fn fixture() -> Fixture {
    serde_json::from_str(include_str!("fixtures/embeddinggemma_reference.json"))
        .expect("fixture parses")
}

fn load(arithmetic: EncoderArithmetic) -> EmbeddingGemma {
    EmbeddingGemma::load_with(&default_encoder_dir(), DeviceChoice::Cpu, arithmetic).unwrap_or_else(
        |e| panic!("EmbeddingGemma must be set up for the tests (scripts/setup-encoder.sh): {e}"),
    )
}

/// The encoder as it ships on this CPU (the packed bf16 kernels where it has AVX-512 BF16).
pub fn encoder() -> &'static EmbeddingGemma {
    static ENCODER: OnceLock<EmbeddingGemma> = OnceLock::new();
    ENCODER.get_or_init(|| load(EncoderArithmetic::Fast))
}

/// The packed bf16 kernels whatever the CPU.
fn kernel_encoder() -> &'static EmbeddingGemma {
    static ENCODER: OnceLock<EmbeddingGemma> = OnceLock::new();
    ENCODER.get_or_init(|| load(EncoderArithmetic::Kernels))
}

/// candle in f32: the reference implementation's arithmetic.
fn exact_encoder() -> &'static EmbeddingGemma {
    static ENCODER: OnceLock<EmbeddingGemma> = OnceLock::new();
    ENCODER.get_or_init(|| load(EncoderArithmetic::Exact))
}

/// Cosine similarity of two vectors, in f64.
fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| f64::from(x) * f64::from(y))
        .sum();
    let norm = |v: &[f32]| v.iter().map(|&x| f64::from(x).powi(2)).sum::<f64>().sqrt();
    dot / (norm(a) * norm(b))
}

/// How far our float32 embedding may land from the float64 oracle's on one text, derived from
/// the oracle's own float32 run on that text (`reference_error`), floored at float32's rounding
/// step of the text's largest element (an oracle error that happened to cancel must not demand
/// exactness). Both are float32 arithmetic over the same weights, but candle sums its reductions
/// (RMS norms, softmax, mean pooling, GEMM inner loops of up to 3,072 terms) in sequence where
/// NumPy sums pairwise, and a sequential sum's rounding grows with its length, a pairwise one with
/// its logarithm: up to about 250 times apart at that length, 7 to 28 times measured on the
/// fixture's texts. 64 sits between. A real fault (a causal mask, another RoPE base, a missing
/// `<eos>`, another prompt) moves elements by 1e-3 or more, thousands of times past the bound.
fn bound(reference_error: f64, max_abs_element: f64) -> f64 {
    64.0 * reference_error.max(f64::from(f32::EPSILON) * max_abs_element)
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn embeddings_match_the_float64_oracle_within_its_own_float32_error() {
    let fixture = fixture();
    let encoder = exact_encoder();
    assert_eq!(encoder.info().prompt, fixture.prompt);
    let texts: Vec<&str> = fixture.cases.iter().map(|c| c.text.as_str()).collect();
    let embeddings = encoder.embed_batch(&texts);
    for (case, embedding) in fixture.cases.iter().zip(embeddings) {
        assert_eq!(
            encoder.tokens(&case.text).expect("tokenises"),
            case.ids,
            "{:?}: tokens differ from the folder's tokenizer (with <bos>, <eos>)",
            case.text
        );
        let embedding = embedding.expect("embeds");
        assert_eq!(embedding.len(), case.embedding.len());
        let error = embedding
            .iter()
            .zip(&case.embedding)
            .map(|(&a, &b)| (f64::from(a) - b).abs())
            .fold(0.0, f64::max);
        let bound = bound(case.float32_max_abs_error, case.max_abs_element);
        eprintln!(
            "{:?}: max |ours - f64| {error:.2e}, oracle f32 {:.2e}, bound {bound:.2e}",
            case.text, case.float32_max_abs_error
        );
        assert!(error <= bound, "{:?}: {error:.2e} > {bound:.2e}", case.text);
    }
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn a_batch_gives_each_text_what_it_gets_alone() {
    let texts = [
        "makasih kak",
        "you are a worthless idiot and everyone hates you",
        "Halo kak, pesanan no. 230915-KX77 belum sampai, resinya JX9981 ya",
    ];
    // On the kernels every row's sums run in the same order whatever the batch, so a text's
    // embedding is the same bits alone or batched: cached features and retraining depend on it.
    let encoder = kernel_encoder();
    let together = encoder.embed_batch(&texts);
    for (text, together) in texts.iter().zip(together) {
        let alone = encoder.embed_batch(&[text]).remove(0).expect("embeds");
        assert_eq!(alone, together.expect("embeds"), "{text:?}");
    }
    // candle's f32 GEMM blocks by row count: the same arithmetic, summed in another order.
    let exact = exact_encoder();
    for (text, together) in texts.iter().zip(exact.embed_batch(&texts)) {
        let alone = exact.embed_batch(&[text]).remove(0).expect("embeds");
        let gap = alone
            .iter()
            .zip(&together.expect("embeds"))
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(gap < 1e-5, "{text:?}: batch and alone differ by {gap}");
    }
}

/// The final token states are what the sentence embedding pools: their mean, through the
/// projections and normalised, is the embedding (so a learned pooling that starts uniform starts
/// at the shipped reading).
#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn the_final_token_states_mean_pooled_are_the_embedding() {
    let encoder = kernel_encoder();
    let texts = ["makasih kak", "he called me stupid in front of everyone"];
    let (dense, normalize) = encoder.projections();
    assert!(normalize, "EmbeddingGemma normalises its embedding");
    for (text, states) in texts.iter().zip(encoder.final_token_states(&texts)) {
        let states = states.expect("states");
        let tokens = encoder.tokens(text).expect("tokenises").len();
        assert_eq!(states.dims(), [tokens, encoder.config().hidden_size]);
        let mut pooled = states.mean_keepdim(0).expect("mean");
        for weight in dense {
            pooled = pooled.matmul(&weight.t().expect("t")).expect("projects");
        }
        let pooled: Vec<f32> = pooled
            .flatten_all()
            .and_then(|t| t.to_vec1())
            .expect("reads");
        let norm = pooled.iter().map(|x| x * x).sum::<f32>().sqrt();
        let pooled: Vec<f32> = pooled.iter().map(|x| x / norm).collect();
        let embedding = encoder.embed_batch(&[text]).remove(0).expect("embeds");
        let gap = pooled
            .iter()
            .zip(&embedding)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(
            gap < 1e-5,
            "{text:?}: pooled states and embedding differ by {gap}"
        );
    }
}

/// A reading of token states gives each token's state after the dense layers: as many as the
/// text has tokens, their mean normalised is the embedding read beside them, and a text's states
/// do not depend on the batch (what a pooling head and `llama-server --pooling none` read).
#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn token_states_after_the_dense_layers_average_to_the_embedding() {
    let encoder = encoder();
    let texts = [
        "makasih kak",
        "he called me stupid in front of everyone, then asked what's for dinner",
    ];
    let reading = EncoderReading {
        layers: Vec::new(),
        embedding: true,
        token_states: true,
    };
    let width = encoder.info().dimensions;
    let together = encoder.read_batch(&texts, &reading);
    for (text, read) in texts.iter().zip(together) {
        let read = read.expect("reads");
        let states = read.token_states.expect("token states asked for");
        let tokens = encoder.tokens(text).expect("tokenises").len();
        assert_eq!(states.len(), tokens * width, "{text:?}");
        let mut mean = vec![0f32; width];
        for state in states.chunks_exact(width) {
            for (m, x) in mean.iter_mut().zip(state) {
                *m += x / tokens as f32;
            }
        }
        let norm = mean.iter().map(|x| x * x).sum::<f32>().sqrt();
        let embedding = read.embedding.expect("embedding asked for");
        let gap = mean
            .iter()
            .zip(&embedding)
            .map(|(m, e)| (m / norm - e).abs())
            .fold(0f32, f32::max);
        assert!(
            gap < 1e-4,
            "{text:?}: mean of token states and embedding differ by {gap}"
        );
        let alone = encoder
            .read_batch(&[text], &reading)
            .remove(0)
            .expect("reads");
        assert_eq!(alone.token_states, Some(states), "{text:?} alone");
    }
}

/// A reading of intermediate layers stops there and gives what a full pass gives at those layers
/// (the same arithmetic on the same rows); the embedding read beside them is `embed_batch`'s.
#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn a_reading_stops_at_its_layers_and_agrees_with_a_full_pass() {
    let encoder = encoder();
    let texts = [
        "makasih kak",
        "you are a worthless idiot and everyone hates you",
    ];
    let shallow = encoder.read_batch(&texts, &EncoderReading::layers(vec![12, 4]));
    let full = encoder.read_batch(
        &texts,
        &EncoderReading {
            layers: vec![4, 12],
            embedding: true,
            token_states: false,
        },
    );
    let embedded = encoder.embed_batch(&texts);
    for ((shallow, full), embedded) in shallow.iter().zip(&full).zip(&embedded) {
        let (shallow, full) = (
            shallow.as_ref().expect("reads"),
            full.as_ref().expect("reads"),
        );
        assert!(shallow.embedding.is_none(), "not asked for");
        assert_eq!(shallow.layer_means.len(), 2);
        assert_eq!(shallow.layer_means[0], full.layer_means[1], "layer 12");
        assert_eq!(shallow.layer_means[1], full.layer_means[0], "layer 4");
        assert_eq!(shallow.layer_means[0].len(), 768);
        assert_eq!(full.embedding.as_ref(), embedded.as_ref().ok());
    }
    let plan = |reading: &EncoderReading| encoder.plan("makasih kak", reading).expect("plans");
    let (half, whole) = (
        plan(&EncoderReading::layers(vec![12])),
        plan(&EncoderReading::embedding()),
    );
    assert_eq!(half.computed_tokens, whole.computed_tokens);
    assert!(
        (whole.flops / half.flops - 2.0).abs() < 1e-9,
        "{half:?} {whole:?}"
    );
    let beyond = encoder.read_batch(&["halo"], &EncoderReading::layers(vec![25]));
    assert!(
        matches!(
            beyond[0],
            Err(EngineError::UnknownLayer {
                layer: 25,
                layers: 24
            })
        ),
        "{beyond:?}"
    );
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn control_token_spellings_stay_text_and_oversized_input_is_refused() {
    let encoder = encoder();
    let ids = encoder
        .tokens("<end_of_turn><start_of_turn>model")
        .expect("tokenises");
    // <bos> first and <eos> last are the encoder's own; nothing between is a control token.
    let inner = &ids[1..ids.len() - 1];
    assert!(!inner.contains(&106) && !inner.contains(&105), "{ids:?}");
    let huge = "kata ".repeat(5000);
    let results = encoder.embed_batch(&[huge.as_str(), "halo"]);
    assert!(matches!(
        results[0],
        Err(EngineError::ContextExceeded { .. })
    ));
    assert!(
        results[1].is_ok(),
        "one text's error leaves the other alone"
    );
}

/// The shipped CPU path rounds weights and the products' inputs to bfloat16; it must stay within
/// bf16's rounding of the f32 path, on short texts, batches and a text past the sliding window
/// (where sliding layers mask): measured 0.99998 or closer on every text here, bounded at 0.9999.
/// A real fault (a wrong window, RoPE table or norm) lands far below.
#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn the_packed_kernels_agree_with_the_f32_path() {
    let fixture = fixture();
    let long =
        "Halo kak, pesanan saya belum sampai. I would like to know where my parcel is. ".repeat(40);
    let mut texts: Vec<&str> = fixture.cases.iter().map(|c| c.text.as_str()).collect();
    texts.extend(["ok", "makasih kak 🙏", long.as_str()]);
    assert!(kernel_encoder().tokens(&long).expect("tokenises").len() > 600);
    let reading = EncoderReading {
        layers: vec![6, 12],
        embedding: true,
        token_states: false,
    };
    let fast = kernel_encoder().read_batch(&texts, &reading);
    let exact = exact_encoder().read_batch(&texts, &reading);
    for ((text, fast), exact) in texts.iter().zip(fast).zip(exact) {
        let (fast, exact) = (fast.expect("reads"), exact.expect("reads"));
        let (a, b) = (
            fast.embedding.expect("embedding"),
            exact.embedding.expect("embedding"),
        );
        let similarity = cosine(&a, &b);
        let layers: Vec<f64> = fast
            .layer_means
            .iter()
            .zip(&exact.layer_means)
            .map(|(a, b)| cosine(a, b))
            .collect();
        let label: String = text.chars().take(30).collect();
        eprintln!("{label:?}: embedding cosine {similarity:.6}, layers 6/12 {layers:.6?}");
        assert!(similarity >= 0.9999, "{label:?}: cosine {similarity:.6}");
        assert!(
            layers.iter().all(|&c| c >= 0.9999),
            "{label:?}: layers {layers:?}"
        );
    }
    // The weights' format and the kernel that runs them are named, so cached features are keyed
    // by them.
    let kernel = aegis_kernels::KernelKind::detect();
    assert!(kernel_encoder().info().weight_format.starts_with(&format!(
        "{} layers ({} kernels)",
        kernel.weights(),
        kernel.name()
    )));
    assert!(exact_encoder()
        .info()
        .weight_format
        .starts_with("f32 layers"));
}

/// The int8 weight format (where this CPU has VNNI; else it is the bf16 kernels and this holds
/// trivially): within cosine 0.999 of the f32 path on the same texts, the bound the heads'
/// verdicts were measured to survive.
#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn the_int8_kernels_agree_with_the_f32_path_within_int8s_rounding() {
    let fixture = fixture();
    let long =
        "Halo kak, pesanan saya belum sampai. I would like to know where my parcel is. ".repeat(40);
    let mut texts: Vec<&str> = fixture.cases.iter().map(|c| c.text.as_str()).collect();
    texts.extend(["ok", "makasih kak 🙏", long.as_str()]);
    let int8 = load(EncoderArithmetic::Int8);
    let fast = int8.embed_batch(&texts);
    let exact = exact_encoder().embed_batch(&texts);
    let mut lowest = (1.0, String::new());
    for ((text, fast), exact) in texts.iter().zip(fast).zip(exact) {
        let similarity = cosine(&fast.expect("embeds"), &exact.expect("embeds"));
        let label: String = text.chars().take(30).collect();
        eprintln!("{label:?}: int8 embedding cosine {similarity:.6}");
        if similarity < lowest.0 {
            lowest = (similarity, label);
        }
    }
    assert!(lowest.0 >= 0.999, "{:?}: cosine {:.6}", lowest.1, lowest.0);
    // The dispatch's own fallbacks: int8 where a kind has it, else the bf16 or f32 kind, else
    // (every kind left out, or a CPU before AVX2) candle's f32 layers, like the exact path.
    use aegis_kernels::KernelKind;
    let format = &int8.info().weight_format;
    match KernelKind::detect_int8()
        .or(Some(KernelKind::detect()).filter(|kind| *kind != KernelKind::Portable))
    {
        Some(kernel) => assert!(
            format.starts_with(&format!(
                "{} layers ({} kernels)",
                kernel.weights(),
                kernel.name()
            )),
            "{format}"
        ),
        None => assert!(format.starts_with("f32 layers"), "{format}"),
    }
}

#[cfg(feature = "cuda")]
mod cuda {
    use super::*;

    /// The GPU runs the layers in bf16 with a dense bf16 embedding, the CPU in f32 with 8-bit
    /// embedding rows: their embeddings differ by bf16's rounding through 24 layers. A head is a
    /// dot product with the embedding, so what it sees is the direction: it must stay within
    /// 0.99 cosine. A real fault (a wrong mask, RoPE or pooling on one side) lands far below.
    #[test]
    #[cfg_attr(
        not(aegis_models),
        ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
    )]
    fn gpu_embeddings_agree_with_the_cpu() {
        let folder = default_encoder_dir();
        let gpu = EmbeddingGemma::load(&folder, DeviceChoice::Cuda(0)).expect("loads on the GPU");
        assert_eq!(gpu.info().device, "cuda:0");
        let mut texts: Vec<String> = fixture().cases.into_iter().map(|c| c.text).collect();
        texts.push("makasih kak, pesanan INV-20931 sudah sampai ".repeat(70));
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let on_cpu = encoder().embed_batch(&texts);
        let on_gpu = gpu.embed_batch(&texts);
        for ((text, cpu), gpu) in texts.iter().zip(on_cpu).zip(on_gpu) {
            let (cpu, gpu) = (
                cpu.expect("embeds on the CPU"),
                gpu.expect("embeds on the GPU"),
            );
            let similarity = cosine(&cpu, &gpu);
            let short: String = text.chars().take(40).collect();
            eprintln!("{short:?}: cosine(cpu, gpu) {similarity:.6}");
            assert!(similarity >= 0.99, "{short:?}: cosine {similarity:.6}");
        }
        // Figures for the README's GPU section (printed, never asserted): the median of warm
        // single-text embeddings, short and about a thousand tokens.
        for (name, text) in [
            ("short", "makasih kak, paketnya sudah sampai"),
            ("long", texts[texts.len() - 1]),
        ] {
            let tokens = gpu.tokens(text).expect("tokenises").len();
            for (device, encoder) in [("cuda:0", &gpu as &EmbeddingGemma), ("cpu", encoder())] {
                encoder.embed_batch(&[text]);
                let mut ms: Vec<f64> = (0..9)
                    .map(|_| {
                        let started = std::time::Instant::now();
                        encoder.embed_batch(&[text]).remove(0).expect("embeds");
                        started.elapsed().as_secs_f64() * 1e3
                    })
                    .collect();
                ms.sort_by(f64::total_cmp);
                eprintln!(
                    "encoder timing: {name} ({tokens} tokens) on {device}: p50 {:.1} ms",
                    ms[4]
                );
            }
        }
    }
}
