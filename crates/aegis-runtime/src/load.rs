//! A closed-loop load on a worker, as benches drive it: each client sends its next message as
//! soon as its last verdict returns, until the time is up. Throughput at N clients is what a
//! team sizes hardware by, and every bench measures it the same way through this.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::Worker;

/// What one level of load gave.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadRun {
    /// Messages answered with a verdict (a refusal, such as a full queue, is not one).
    pub verdicts: usize,
    pub seconds: f64,
}

impl LoadRun {
    pub fn verdicts_per_second(&self) -> f64 {
        self.verdicts as f64 / self.seconds.max(f64::EPSILON)
    }
}

/// `clients` clients on `worker` for `duration`; `text(client, k)` is a client's `k`-th message.
/// Each is spawned on the current tokio runtime.
pub async fn closed_loop(
    worker: &Worker,
    clients: usize,
    duration: Duration,
    text: Arc<dyn Fn(usize, usize) -> String + Send + Sync>,
) -> LoadRun {
    let started = Instant::now();
    let deadline = started + duration;
    let tasks: Vec<_> = (0..clients)
        .map(|client| {
            let worker = worker.clone();
            let text = text.clone();
            tokio::spawn(async move {
                let mut verdicts = 0usize;
                let mut sent = 0usize;
                while Instant::now() < deadline {
                    if worker.check(text(client, sent)).await.is_ok() {
                        verdicts += 1;
                    }
                    sent += 1;
                }
                verdicts
            })
        })
        .collect();
    let mut verdicts = 0;
    for task in tasks {
        verdicts += task.await.unwrap_or(0);
    }
    LoadRun {
        verdicts,
        seconds: started.elapsed().as_secs_f64(),
    }
}
