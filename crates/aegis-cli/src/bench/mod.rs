//! `aegis bench`: verdict cost, side by side in one run on one model file, of
//! (a) the original service's method (generate each validator's answer, parse it, generate a
//!     rejection), (b) one forward per validator prompt scored from Yes/No, (c) our fast path
//!     (shared prefixes, cached openings, packed batches), and (d) llama.cpp prefilling the same
//!     prompt tokens (via llama-cpp-python, when a Python with it is given), and (e) the original
//!     method in PyTorch `transformers` on a randomly initialised model of the same shape (GPU
//!     machines; scripts/bench-gpu.sh).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aegis_engine::{ComputePlan, GemmaEngine, LanguageModel, Prompt, WeightFiles};
use aegis_guard::{encoding_prompt, layers_read, Guard, Language, RejectionMode, Validator};
use aegis_runtime::{closed_loop, Worker};
use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use crate::options::GuardArgs;
use crate::ExitStatus;

mod machine;
mod report;
use machine::{cpu_kernels, gpu_memory_mib, memory_kib};
use report::print_report;

#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    #[command(flatten)]
    pub guard: GuardArgs,
    /// Verdicts timed per message length for the fast path; the slower methods run fewer.
    #[arg(long, default_value_t = 20)]
    pub runs: usize,
    /// Seconds of load per concurrency level.
    #[arg(long, default_value_t = 8.0)]
    pub seconds: f64,
    /// A Python that has llama-cpp-python, for column (d); without one (d) is left out.
    #[arg(long, env = "AEGIS_BENCH_PYTHON")]
    pub llama_python: Option<PathBuf>,
    /// A Python with torch and transformers, for column (e) on the GPU; without one (e) is left out.
    #[arg(long, env = "AEGIS_BENCH_TORCH_PYTHON")]
    pub transformers_python: Option<PathBuf>,
    /// Time only the fast path (c) per message length: for comparing load options, such as
    /// `--weights f32` against `--weights quantized`, side by side.
    #[arg(long)]
    pub fast_only: bool,
    /// Also write every figure as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Tokens the original method lets each validator's answer and the rejection message run to.
const ORIGINAL_ANSWER_TOKENS: usize = 16;
const ORIGINAL_REJECTION_TOKENS: usize = 48;

/// The lengths the issue asks for, in message tokens.
const LENGTHS: [(&str, usize); 3] = [("short", 20), ("medium", 120), ("long", 1000)];

/// Ordinary customer-chat text, Indonesian and English, cut to each length.
const CHAT: &str = "Halo kak, saya mau tanya soal pesanan saya yang kemarin, kok belum sampai juga ya? \
Sudah saya cek di aplikasi statusnya masih dikemas. Hi, I also wanted to ask whether I can change the \
delivery address to my office, because nobody is home during the day. Terima kasih sebelumnya, ditunggu \
kabarnya ya kak. Oh iya, apakah bisa bayar pakai transfer bank atau hanya e-wallet saja? ";

struct Timing {
    samples_ms: Vec<f64>,
}

impl Timing {
    fn measure(runs: usize, mut run: impl FnMut() -> Result<()>) -> Result<Self> {
        let mut samples_ms = Vec::with_capacity(runs);
        for _ in 0..runs.max(1) {
            let started = Instant::now();
            run()?;
            samples_ms.push(started.elapsed().as_secs_f64() * 1e3);
        }
        Ok(Self { samples_ms })
    }

    fn percentile(&self, p: f64) -> f64 {
        let mut sorted = self.samples_ms.clone();
        sorted.sort_by(f64::total_cmp);
        let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
        sorted[rank.min(sorted.len() - 1)]
    }

    fn p50(&self) -> f64 {
        self.percentile(50.0)
    }

    fn json(&self) -> Value {
        json!({"p50_ms": self.p50(), "p95_ms": self.percentile(95.0), "samples_ms": self.samples_ms})
    }
}

pub fn run(args: BenchArgs) -> Result<ExitStatus> {
    let (engine, files) = args
        .guard
        .model
        .load_with_files(args.guard.encoder_chosen())?;
    let engine = Arc::new(engine);
    let model: Arc<dyn LanguageModel> = engine.clone();
    let prompts_dir = args.guard.prompts_dir()?;
    // The guard every front end builds: with an encoder, the (c) column times verdicts on it.
    let guard = args.guard.guard_on(model.clone(), &prompts_dir)?;
    let validators = guard.validators().to_vec();
    let rss_after_load = memory_kib("VmRSS");
    let info = model.info().clone();
    println!(
        "# aegis bench\n\nmodel {} ({} weights on {}), heads read {}, templates {}, {} validators ({} decided by heads)\n",
        info.id,
        info.weight_format,
        info.device,
        guard.encoder().map_or("the model's hidden states", |e| e.info().id.as_str()),
        prompts_dir.display(),
        validators.len(),
        guard.heads().iter().flatten().count()
    );

    let messages: Vec<(&str, String)> = LENGTHS
        .iter()
        .map(|&(name, tokens)| Ok((name, message_of(model.as_ref(), tokens)?)))
        .collect::<Result<_>>()?;
    let runs = args.runs.max(1);
    let slow_runs = (runs / 4).clamp(1, 5);
    let original =
        Guard::new(model.clone(), validators.clone()).with_rejection(RejectionMode::Generated {
            max_tokens: ORIGINAL_REJECTION_TOKENS,
        });

    let mut rows = Vec::new();
    for (name, text) in &messages {
        let prompts: Vec<Prompt> = validators.iter().map(|v| v.prompt(text)).collect();
        let plan = engine.plan(&prompts)?;
        let fast = verdict_plan(&engine, &guard, text)?;
        let message_tokens = model.count_user_tokens(text)?;
        eprintln!(
            "{name}: {message_tokens} message tokens, {} prompt tokens",
            plan.prompt_tokens
        );
        let (a, b) = if args.fast_only {
            (None, None)
        } else {
            let a = Timing::measure(slow_runs, || original_method(&original, &prompts, text))?;
            let b = Timing::measure(slow_runs, || {
                engine
                    .score_separately(&prompts)
                    .map(drop)
                    .map_err(Into::into)
            })?;
            (Some(a), Some(b))
        };
        guard.check(text)?; // warm the opening cache, as in steady service
        let c = Timing::measure(runs, || guard.check(text).map(drop).map_err(Into::into))?;
        rows.push(json!({
            "length": name,
            // For a peer measured on the same texts (scripts/bench_encoder_st.py).
            "text": text,
            "message_tokens": message_tokens,
            "prompt_tokens": plan.prompt_tokens,
            "computed_tokens": fast.computed_tokens,
            "flops": fast.flops,
            "a_original": a.as_ref().map(Timing::json),
            "b_separate": b.as_ref().map(Timing::json),
            "c_fast": c.json(),
        }));
    }

    let remote = args
        .guard
        .backend
        .as_deref()
        .map(|url| remote_backend(url, model.clone(), &validators, &messages, runs))
        .transpose()?;

    // The baselines are slow; --fast-only compares load options on (c) alone.
    let baseline_runs = slow_runs.max(3);
    let baseline_python = |python: &Option<PathBuf>| python.clone().filter(|_| !args.fast_only);
    let llama = baseline_python(&args.llama_python)
        .map(|python| {
            let (engine, files) = (engine.as_ref(), &files.weights);
            llama_cpp(
                &python,
                files,
                engine,
                &validators,
                &messages,
                baseline_runs,
            )
        })
        .transpose()?;
    let transformers = baseline_python(&args.transformers_python)
        .map(|python| {
            let engine = engine.as_ref();
            transformers_baseline(&python, engine, &validators, &messages, baseline_runs)
        })
        .transpose()?;

    let (concurrency, validator_counts) = if args.fast_only {
        (Value::Null, Value::Null)
    } else {
        (
            concurrency_levels(guard.clone(), args.seconds)?,
            validator_scaling(model.clone(), &guard, &messages[0].1, runs)?,
        )
    };
    // The floor's rate is that of whatever computes the verdict: the encoder's kernels when its
    // heads decide, else the model's GEMM.
    let encoder_gflops = guard
        .encoder()
        .and_then(|e| e.matmul_gflops(Duration::from_secs(2)));
    let (gflops, gemm) = match encoder_gflops {
        Some(rate) => (rate, "the encoder's"),
        None => (engine.matmul_gflops(Duration::from_secs(2))?, "the model's"),
    };

    let encoder_format = guard
        .encoder()
        .map(|e| e.info().weight_format.clone())
        .unwrap_or_default();
    let short = &rows[0];
    let floor_ms = short["flops"].as_f64().unwrap_or(0.0) / (gflops * 1e9) * 1e3;
    let report = json!({
        "model": {"id": info.id, "weights": info.weight_format, "device": info.device,
                  "synthetic": info.synthetic},
        "validators": validators.len(),
        "lengths": rows,
        "llama_cpp": llama,
        "remote_backend": remote,
        "transformers": transformers,
        "gpu_memory_mib": gpu_memory_mib(),
        "concurrency": concurrency,
        "validator_counts": validator_counts,
        "matmul_gflops": gflops,
        "matmul_of": gemm,
        "cpu_kernels": cpu_kernels(&encoder_format),
        "floor_short_ms": floor_ms,
        "rss_after_load_mib": rss_after_load / 1024.0,
        "peak_rss_mib": memory_kib("VmHWM") / 1024.0,
        "prefix_cache": model.prefix_cache_stats(),
    });
    print_report(&report);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(ExitStatus::Passed)
}

/// Prompt-decided verdicts (no heads: a model server returns no hidden states) through the model
/// server at `url` against the same on the local engine, alternating run by run so both see the
/// same machine load.
fn remote_backend(
    url: &str,
    local: Arc<dyn LanguageModel>,
    validators: &[aegis_guard::Validator],
    messages: &[(&str, String)],
    runs: usize,
) -> Result<Value> {
    let server = aegis_remote::RemoteModel::connect_with_cached_tokenizer(url)
        .with_context(|| format!("connecting to the model server at {url}"))?;
    let served = server.info().id.clone();
    let remote = Guard::new(Arc::new(server), validators.to_vec());
    let local = Guard::new(local, validators.to_vec());
    let mut lengths = Vec::new();
    for (name, text) in messages {
        // Warm both: the local opening cache and the server's prompt cache.
        local.check(text)?;
        remote.check(text)?;
        let (mut local_ms, mut remote_ms) = (Vec::new(), Vec::new());
        for run in 0..runs.max(1) {
            // A new message each run, different at every position (its words rotated): either
            // side may reuse the templates' openings, as in service, but never a prompt it has
            // seen (llama.cpp's server keeps whole prompts and would answer those at once).
            let words: Vec<&str> = text.split_whitespace().collect();
            let turn = (run * 7 + 1) % words.len().max(1);
            let text = [&words[turn..], &words[..turn]].concat().join(" ");
            let time = |guard: &Guard| {
                Timing::measure(1, || guard.check(&text).map(drop).map_err(Into::into))
                    .map(|t| t.samples_ms)
            };
            local_ms.extend(time(&local)?);
            remote_ms.extend(time(&remote)?);
        }
        let local = Timing {
            samples_ms: local_ms,
        };
        let remote = Timing {
            samples_ms: remote_ms,
        };
        lengths.push(json!({
            "length": name,
            "local_prompts": local.json(),
            "remote_prompts": remote.json(),
            "remote_over_local": remote.p50() / local.p50(),
        }));
    }
    Ok(json!({"url": url, "served": served, "lengths": lengths}))
}

/// The original service's way: each validator generates its answer, which is parsed; a
/// rejection is generated when any answer says yes.
fn original_method(guard: &Guard, prompts: &[Prompt], text: &str) -> Result<()> {
    let mut failed = Vec::new();
    for (prompt, validator) in prompts.iter().zip(guard.validators()) {
        let answer = guard.model().generate(
            prompt,
            ORIGINAL_ANSWER_TOKENS,
            &mut aegis_engine::whole_answer,
        )?;
        if answer.trim_start().to_lowercase().starts_with("yes") {
            failed.push(validator);
        }
    }
    if !failed.is_empty() {
        guard.rejection_message(&failed, Language::detect(text));
    }
    Ok(())
}

/// What `guard.check(text)` computes with a warm cache: the shared encoding through the deepest
/// layer a head reads, and the prompts of the validators no head decides.
fn verdict_plan(engine: &GemmaEngine, guard: &Guard, text: &str) -> Result<ComputePlan> {
    let layers = layers_read(guard.heads());
    let mut encoding = if layers.is_empty() {
        ComputePlan::default()
    } else {
        engine.plan_encoding(&[encoding_prompt(engine.info().chat_format, text)], &layers)?
    };
    if let Some(encoder) = guard.encoder() {
        let reading = guard.encoder_reading();
        if !reading.is_empty() {
            encoding = encoding + encoder.plan(text, &reading)?;
        }
    }
    let prompted: Vec<Prompt> = guard
        .validators()
        .iter()
        .zip(guard.heads())
        .filter(|(_, head)| guard.prompt_scores() || head.is_none())
        .map(|(v, _)| v.prompt(text))
        .collect();
    let prompts = if prompted.is_empty() {
        ComputePlan::default()
    } else {
        engine.plan(&prompted)?
    };
    Ok(encoding + prompts)
}

/// `CHAT` repeated and cut, word by word, to about `tokens` message tokens.
fn message_of(model: &dyn LanguageModel, tokens: usize) -> Result<String> {
    let words: Vec<&str> = CHAT.split_whitespace().collect();
    let mut text = String::new();
    for word in words.iter().cycle() {
        if model.count_user_tokens(&text)? >= tokens {
            break;
        }
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(word);
    }
    Ok(text)
}

/// Verdicts per second through the real worker (dynamic batching) with `n` clients each sending
/// short messages back to back.
fn concurrency_levels(guard: Guard, seconds: f64) -> Result<Value> {
    // Room for every client's request at the highest level: a full queue refuses, and a refusal
    // is not a verdict.
    let worker = Worker::start(256, move || Ok(guard));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let short: Vec<String> = CHAT
        .split(['?', '.'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    let mut levels = Vec::new();
    for clients in [1usize, 8, 32, 128] {
        let run = runtime.block_on(async {
            worker.settled().await;
            let texts = short.clone();
            // Distinct per client and request, so no two share a whole prompt.
            let text = move |client: usize, k: usize| {
                let i = client + k * clients;
                format!("{} ({client}-{i})", texts[i % texts.len()])
            };
            closed_loop(
                &worker,
                clients,
                Duration::from_secs_f64(seconds),
                Arc::new(text),
            )
            .await
        });
        eprintln!(
            "concurrency {clients}: {} verdicts in {:.1} s",
            run.verdicts, run.seconds
        );
        levels.push(json!({"clients": clients, "verdicts_per_s": run.verdicts_per_second()}));
    }
    Ok(Value::Array(levels))
}

/// Fast-path latency on the short message with 4, 8 and 16 validators: the shipped ones plus
/// variants whose policy text differs where the validators' own texts differ. A variant of a
/// head-decided validator gets a copy of its head, so the count measures what a team adding
/// validators would see.
fn validator_scaling(
    model: Arc<dyn LanguageModel>,
    shipped: &Guard,
    text: &str,
    runs: usize,
) -> Result<Value> {
    // The variants read what the shipped guard reads: its encoder, when its heads are on one.
    let encoder = shipped.encoder().cloned();
    let (shipped, heads) = (shipped.validators(), shipped.heads());
    let mut out = Vec::new();
    for count in [4usize, 8, 16] {
        let mut validators = Vec::with_capacity(count);
        let mut variant_heads = Vec::new();
        for i in 0..count {
            let base = &shipped[i % shipped.len()];
            if i < shipped.len() {
                validators.push(base.clone());
                continue;
            }
            let variant = i / shipped.len();
            let content = base
                .content
                .replacen("* \"", &format!("* \"[rule set {variant}] "), 1);
            if content == base.content {
                bail!("{} has no policy bullet to vary", base.key);
            }
            let path = PathBuf::from(format!("{}_{variant}.txt", base.key));
            let parsed = Validator::parse(&path, &content)?;
            if let Some(head) = &heads[i % shipped.len()] {
                let mut head = head.clone();
                head.validator = parsed.key.clone();
                variant_heads.push(head);
            }
            validators.push(parsed);
        }
        let mut guard = Guard::new(model.clone(), validators).with_encoder(encoder.clone());
        for head in heads.iter().flatten().cloned().chain(variant_heads) {
            guard = guard.with_head(head)?;
        }
        guard.check(text)?;
        let timing = Timing::measure(runs, || guard.check(text).map(drop).map_err(Into::into))?;
        out.push(json!({"validators": count, "latency": timing.json()}));
    }
    Ok(Value::Array(out))
}

/// Column (d): llama.cpp prefilling each validator's prompt tokens (the same ids), one prompt at
/// a time, through `scripts/bench_llama_cpp.py`.
fn llama_cpp(
    python: &Path,
    weights: &WeightFiles,
    engine: &GemmaEngine,
    validators: &[Validator],
    messages: &[(&str, String)],
    runs: usize,
) -> Result<Value> {
    let WeightFiles::Gguf(gguf) = weights else {
        bail!("llama.cpp needs a GGUF model file");
    };
    let request = json!({
        "model": gguf,
        "threads": std::thread::available_parallelism().map_or(2, |n| n.get()),
        "runs": runs,
        "cases": prompt_ids(engine, validators, messages)?,
    });
    run_python(python, "bench_llama_cpp.py", &request, "llama.cpp")
}

/// Each message length's validator prompts as token ids, for the baselines to run the very same.
fn prompt_ids(
    engine: &GemmaEngine,
    validators: &[Validator],
    messages: &[(&str, String)],
) -> Result<serde_json::Map<String, Value>> {
    let mut cases = serde_json::Map::new();
    for (name, text) in messages {
        let ids = validators
            .iter()
            .map(|v| engine.tokenizer().encode_prompt(&v.prompt(text)))
            .collect::<aegis_engine::Result<Vec<_>>>()?;
        cases.insert(name.to_string(), json!(ids));
    }
    Ok(cases)
}

/// Runs `scripts/<script> REQUEST.json` with `python` and reads its JSON answer. The scripts folder
/// is the source tree's, or `AEGIS_SCRIPTS` where the binary runs without one (a GPU machine).
fn run_python(python: &Path, script: &str, request: &Value, what: &str) -> Result<Value> {
    let scripts = std::env::var_os("AEGIS_SCRIPTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts"));
    let path = std::env::temp_dir().join(format!("aegis-bench-{}.json", std::process::id()));
    std::fs::write(&path, serde_json::to_vec(request)?)?;
    let output = Command::new(python)
        .arg(scripts.join(script))
        .arg(&path)
        .output()
        .with_context(|| format!("running {}", python.display()));
    let _ = std::fs::remove_file(&path);
    let output = output?;
    if !output.status.success() {
        bail!(
            "{what} benchmark failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    serde_json::from_slice(&output.stdout).with_context(|| format!("reading {what} results"))
}

/// Column (e): the original method in PyTorch `transformers` on an HF Gemma 3 of this model's
/// shape (random bf16 weights), through `scripts/bench_transformers.py`, fed the same prompt ids.
fn transformers_baseline(
    python: &Path,
    engine: &GemmaEngine,
    validators: &[Validator],
    messages: &[(&str, String)],
    runs: usize,
) -> Result<Value> {
    // The rejection prompt the guard writes when every validator fails (the longest one).
    let every: Vec<&Validator> = validators.iter().collect();
    let rejection = engine.tokenizer().encode_prompt(&Guard::rejection_prompt(
        engine.info().chat_format,
        &every,
        Language::English,
    ))?;
    let cfg = engine.model().config();
    let request = json!({
        "shape": {
            "vocab_size": cfg.vocab_size, "hidden_size": cfg.hidden_size,
            "intermediate_size": cfg.intermediate_size, "num_layers": cfg.num_layers,
            "num_heads": cfg.num_heads, "num_kv_heads": cfg.num_kv_heads,
            "head_dim": cfg.head_dim, "sliding_window": cfg.sliding_window,
            "rope_global_base": cfg.rope_global_base, "rope_local_base": cfg.rope_local_base,
            "rope_global_scale": cfg.rope_global_scale,
            "query_pre_attn_scalar": cfg.query_pre_attn_scalar,
            "context_length": cfg.context_length,
        },
        "device": engine.info().device,
        "runs": runs,
        "answer_tokens": ORIGINAL_ANSWER_TOKENS,
        "rejection_tokens": ORIGINAL_REJECTION_TOKENS,
        "cases": prompt_ids(engine, validators, messages)?,
        "rejection": rejection,
    });
    run_python(python, "bench_transformers.py", &request, "transformers")
}
