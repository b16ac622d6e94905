//! Load run against the real server with the real model: N requests at concurrency C to
//! POST /validate, then p50/p99 latency, throughput, answer counts, and a history check.
//!
//! Run: cargo bench -p aegis-server --bench load [-- REQUESTS CONCURRENCY QUEUE]
//! (defaults 1000 32 16: a queue smaller than the concurrency, so the 503 path is exercised;
//! clients honour Retry-After).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use aegis_engine::ModelRequest;
use aegis_guard::Guard;
use aegis_runtime::Worker;
use aegis_server::{AppState, ServerConfig};
use aegis_store::{HistoryFilter, Store};

const MESSAGES: [&str; 6] = [
    "Bagaimana cara top up saldo?",
    "dasar goblok kamu anjing",
    "Beli saham BBCA sekarang, pasti cuan 50% minggu depan!",
    "Selamat pagi, apa kabar?",
    "WIN a FREE iPhone now, click the link",
    "Can you help me reset my password?",
];

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let numbers: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let requests = numbers.first().copied().unwrap_or(1000);
    let concurrency = numbers.get(1).copied().unwrap_or(32);
    let queue = numbers.get(2).copied().unwrap_or(16);
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let dir = tempfile::tempdir()?;
        let store = Arc::new(Store::open(&dir.path().join("history.db")).await?);
        let engine = Arc::new(ModelRequest::new("default").load()?.0);
        let prompts = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../prompt_guard");
        let worker = Worker::start(queue, move || {
            Guard::from_dir(engine, &prompts).map(|(g, _)| g).map_err(|e| e.to_string())
        });
        worker.settled().await;
        let state = Arc::new(AppState::new(worker, Some(store.clone()), ServerConfig::default()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/validate", listener.local_addr()?);
        tokio::spawn(aegis_server::serve(listener, state, std::future::pending()));

        let client = reqwest::Client::new();
        let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let started = Instant::now();
        let tasks: Vec<_> = (0..concurrency)
            .map(|_| {
                let (client, url, next) = (client.clone(), url.clone(), next.clone());
                tokio::spawn(async move {
                    let mut seen = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if i >= requests {
                            break;
                        }
                        let sent = Instant::now();
                        let answer = client
                            .post(&url)
                            .json(&serde_json::json!({"user_id": "load", "question": MESSAGES[i % MESSAGES.len()]}))
                            .send()
                            .await;
                        let (status, retry_after) = match answer {
                            Ok(r) => (
                                r.status().as_u16(),
                                r.headers()
                                    .get("retry-after")
                                    .and_then(|v| v.to_str().ok())
                                    .and_then(|v| v.parse::<u64>().ok()),
                            ),
                            Err(_) => (0, None),
                        };
                        seen.push((status, sent.elapsed().as_secs_f64() * 1e3));
                        // A well-behaved client waits as told before its next request.
                        if let Some(seconds) = retry_after {
                            tokio::time::sleep(std::time::Duration::from_secs(seconds)).await;
                        }
                    }
                    seen
                })
            })
            .collect();
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await?);
        }
        let wall = started.elapsed().as_secs_f64();
        let count = |code: u16| all.iter().filter(|(s, _)| *s == code).count();
        let mut ok_ms: Vec<f64> = all.iter().filter(|(s, _)| *s == 200).map(|(_, ms)| *ms).collect();
        let mut busy_ms: Vec<f64> = all.iter().filter(|(s, _)| *s == 503).map(|(_, ms)| *ms).collect();
        ok_ms.sort_by(f64::total_cmp);
        busy_ms.sort_by(f64::total_cmp);
        let recorded = store.count(&HistoryFilter { user_id: Some("load".into()), ..Default::default() }).await?;
        println!("{requests} requests to POST /validate at concurrency {concurrency}, queue {queue}, in {wall:.1} s");
        println!("| answer | count | p50 | p99 |");
        println!("|---|---:|---:|---:|");
        println!("| 200 | {} | {:.0} ms | {:.0} ms |", ok_ms.len(), percentile(&ok_ms, 0.5), percentile(&ok_ms, 0.99));
        println!("| 503 | {} | {:.1} ms | {:.1} ms |", busy_ms.len(), percentile(&busy_ms, 0.5), percentile(&busy_ms, 0.99));
        println!("| other | {} | | |", all.len() - count(200) - count(503));
        println!("throughput: {:.2} verdicts/s (200s), {:.0} answers/s (all)", ok_ms.len() as f64 / wall, all.len() as f64 / wall);
        println!("history holds {recorded} verdicts for {} answers 200: {}", ok_ms.len(), if recorded as usize == ok_ms.len() { "one per 200" } else { "MISMATCH" });
        Ok(())
    })
}
