//! The worker's batching under load, with the model's cost simulated: each batch costs what the
//! real encoder's did on an H100 (6.5 ms, plus 0.23 ms a message; 2026-11-27's batch log), so
//! what is measured is whether the clients' requests gather into full batches, not the model.
//! Clients resend as soon as they are answered, as `aegis bench`'s do, on a 2-thread runtime.
//!
//! Run: cargo bench -p aegis-runtime --bench gather [-- SECONDS]
//! Prints, per number of clients, verdicts a second and how many batches of each size ran.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aegis_engine::testing::FakeModel;
use aegis_engine::{Encoding, LanguageModel, ModelInfo, Prompt, Result, Scores, Segment};
use aegis_guard::{Guard, Validator};
use aegis_runtime::{closed_loop, Worker};

const BATCH_COST: Duration = Duration::from_micros(6_500);
const MESSAGE_COST: Duration = Duration::from_micros(230);

/// The fake model, with each batch taking the simulated time and its size recorded.
struct TimedModel {
    inner: FakeModel,
    batches: Mutex<Vec<usize>>,
}

impl LanguageModel for TimedModel {
    fn info(&self) -> &ModelInfo {
        self.inner.info()
    }
    fn count_user_tokens(&self, text: &str) -> Result<usize> {
        self.inner.count_user_tokens(text)
    }
    fn count_prompt_tokens(&self, prompt: &[Segment]) -> Result<usize> {
        self.inner.count_prompt_tokens(prompt)
    }
    fn score(&self, prompts: &[Prompt]) -> Result<Scores> {
        self.inner.score(prompts)
    }
    fn score_batch(&self, messages: &[Vec<Prompt>]) -> Vec<Result<Scores>> {
        let cost = BATCH_COST + MESSAGE_COST * messages.len() as u32;
        let until = Instant::now() + cost;
        // Spinning, not sleeping: a sleep's wake-up lag would be part of every batch.
        while Instant::now() < until {
            std::hint::spin_loop();
        }
        if let Ok(mut batches) = self.batches.lock() {
            batches.push(messages.len());
        }
        self.inner.score_batch(messages)
    }
    fn encode_batch(&self, prompts: &[Prompt], layers: &[usize]) -> Vec<Result<Encoding>> {
        self.inner.encode_batch(prompts, layers)
    }
    fn generate(
        &self,
        prompt: &[Segment],
        max_tokens: usize,
        on_text: &mut dyn FnMut(&str) -> ControlFlow<()>,
    ) -> Result<String> {
        self.inner.generate(prompt, max_tokens, on_text)
    }
}

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let seconds: f64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(3.0);
    let model = Arc::new(TimedModel {
        inner: FakeModel::new(vec![]),
        batches: Mutex::new(Vec::new()),
    });
    let validator = Validator::parse(
        std::path::Path::new("spam.txt"),
        "---\nname: Spam\nrejection:\n  id: Maaf.\n  en: Sorry.\n---\nMessage: {{message}}\nIs it spam?\n",
    )?;
    let guard = Guard::new(model.clone(), vec![validator]);
    let worker = Worker::start(256, move || Ok(guard));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    println!("| clients | verdicts/s | batches by size |");
    println!("|---|---|---|");
    for clients in [1usize, 8, 32, 128] {
        let run = runtime.block_on(async {
            worker.settled().await;
            if let Ok(mut batches) = model.batches.lock() {
                batches.clear();
            }
            let text = |client: usize, k: usize| format!("halo kak, pesanan saya ({client}-{k})");
            closed_loop(
                &worker,
                clients,
                Duration::from_secs_f64(seconds),
                Arc::new(text),
            )
            .await
        });
        let batches = model.batches.lock().map(|b| b.clone()).unwrap_or_default();
        let mut sizes: BTreeMap<usize, usize> = BTreeMap::new();
        for size in batches {
            *sizes.entry(size).or_default() += 1;
        }
        let sizes: Vec<String> = sizes.iter().map(|(s, n)| format!("{s}×{n}")).collect();
        println!(
            "| {clients} | {:.0} | {} |",
            run.verdicts_per_second(),
            sizes.join(" ")
        );
    }
    Ok(())
}
