//! A streamed answer from an upstream chat server, checked as it is written: the answer is read
//! as the assistant's turn in its conversation whenever `aegis_upstream::GrowingAnswer` says a
//! check is due, and what the client may have comes out as [`Step`]s. The HTTP API turns them
//! into OpenAI's chunks; the console's Playground shows them as they come.

use std::sync::Arc;
use std::time::Duration;

use aegis_guard::{GuardInput, Status, Turn, Verdict};
use aegis_store::{NewVerdict, Source, Store};
use aegis_upstream::{CheckPoint, Deltas, GrowingAnswer, StreamPolicy};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::worker::{Checked, Worker, WorkerError};

/// Steps a slow reader may fall behind by before the relay waits for it.
const STEPS_AHEAD: usize = 64;

/// One check of the growing answer.
#[derive(Debug, Clone)]
pub struct StreamCheck {
    pub verdict: Verdict,
    /// Characters of the answer before the part this check was the first to read.
    pub offset: usize,
    /// Characters of the answer it read.
    pub checked_chars: usize,
}

/// What happens to a streamed answer, in order.
#[derive(Debug, Clone)]
pub enum Step {
    /// The upstream's name for the answer (its first chunk's `id`, `model` and `created`).
    Named {
        id: Option<String>,
        model: Option<String>,
        created: Option<u64>,
    },
    /// Text the client may have now, and the check that released it, if one did (with
    /// `Release::Immediate` text comes before its check, and a passed check releases nothing).
    Text {
        text: String,
        check: Option<StreamCheck>,
    },
    /// An upstream chunk without text (its role, usage): passed on as it came.
    Upstream(Value),
    /// A check failed: the rest of the answer is dropped and the upstream request with it.
    Cut {
        check: StreamCheck,
        /// Whether any of the answer reached the client before the cut.
        sent_any: bool,
    },
    /// All of the answer passed; the upstream's own finish chunk, if it sent one.
    Finished(Option<Value>),
    /// The upstream or a check failed, or the time ran out: the answer ends unfinished.
    Failed(String),
}

/// Who asked, for history, and how long the whole answer may take.
#[derive(Debug, Clone)]
pub struct StreamContext {
    pub store: Option<Arc<Store>>,
    pub source: Source,
    pub user_id: Option<String>,
    pub limit: Duration,
}

/// Relays `deltas` (the upstream's answer to `conversation`, whose last turn is the user's) on a
/// task of its own and returns its steps. Dropping the receiver stops the relay, which drops the
/// upstream request. The answer's last verdict goes to history, as far as it was checked.
pub fn guard_stream(
    worker: Worker,
    conversation: Vec<Turn>,
    deltas: Deltas,
    policy: StreamPolicy,
    context: StreamContext,
) -> mpsc::Receiver<Step> {
    let (sender, steps) = mpsc::channel(STEPS_AHEAD);
    tokio::spawn(async move {
        let limit = context.limit;
        let mut relay = Relay {
            worker,
            conversation,
            context,
            sender: sender.clone(),
        };
        let ended = tokio::time::timeout(limit, relay.run(deltas, policy)).await;
        let failure = match ended {
            Ok(Ok(())) => return,
            Ok(Err(Stop::ClientLeft)) => {
                tracing::debug!("a streaming client left; the upstream request was dropped");
                return;
            }
            Ok(Err(Stop::Failed(message))) => message,
            Err(_) => format!("the answer took longer than {} s", limit.as_secs()),
        };
        tracing::warn!(message = %failure, "a guarded stream failed");
        let _ = sender.send(Step::Failed(failure)).await;
    });
    steps
}

enum Stop {
    ClientLeft,
    Failed(String),
}

struct Relay {
    worker: Worker,
    conversation: Vec<Turn>,
    context: StreamContext,
    sender: mpsc::Sender<Step>,
}

type RunningCheck = (CheckPoint, JoinHandle<Result<Checked, WorkerError>>);

impl Relay {
    async fn run(&mut self, mut deltas: Deltas, policy: StreamPolicy) -> Result<(), Stop> {
        let mut answer = GrowingAnswer::new(policy);
        let mut running: Option<RunningCheck> = None;
        let mut last: Option<Checked> = None;
        let mut finish: Option<Value> = None;
        let mut named = false;
        let mut upstream_done = false;
        loop {
            if running.is_none() {
                if let Some(point) = answer.due(upstream_done) {
                    let worker = self.worker.clone();
                    let input =
                        GuardInput::answer(self.conversation.clone(), &answer.text()[..point.upto]);
                    // Once an answer streams, a full queue delays its checks instead of failing
                    // them; the time limit still bounds the whole answer.
                    running = Some((
                        point,
                        tokio::spawn(async move { worker.check_waiting(input, None).await }),
                    ));
                }
            }
            if upstream_done && running.is_none() {
                break;
            }
            tokio::select! {
                biased;
                () = self.sender.closed() => {
                    if let Some((_, check)) = running {
                        check.abort();
                    }
                    return Err(Stop::ClientLeft);
                }
                joined = async { running.as_mut().map(|(_, check)| check).expect("guarded").await }, if running.is_some() => {
                    let Some((point, _)) = running.take() else { continue };
                    let checked = match joined {
                        Ok(Ok(checked)) => checked,
                        Ok(Err(error)) => return Err(Stop::Failed(error.to_string())),
                        Err(join) => return Err(Stop::Failed(format!("a check failed: {join}"))),
                    };
                    let text = answer.text();
                    let check = StreamCheck {
                        verdict: checked.verdict.clone(),
                        offset: text[..point.from].chars().count(),
                        checked_chars: text[..point.upto].chars().count(),
                    };
                    if checked.verdict.status == Status::Failed {
                        let sent_any = answer.released() > 0;
                        self.record(&answer.text()[..point.upto], &checked).await;
                        self.send(Step::Cut { check, sent_any }).await;
                        return Ok(());
                    }
                    let text = answer.passed(point).to_string();
                    self.send(Step::Text { text, check: Some(check) }).await;
                    last = Some(checked);
                }
                next = deltas.next(), if !upstream_done => match next {
                    None => upstream_done = true,
                    Some(Err(error)) => return Err(Stop::Failed(error.to_string())),
                    Some(Ok(chunk)) => {
                        if !named {
                            named = true;
                            self.send(Step::Named {
                                id: chunk.get("id").and_then(Value::as_str).map(str::to_string),
                                model: chunk.get("model").and_then(Value::as_str).map(str::to_string),
                                created: chunk.get("created").and_then(Value::as_u64),
                            }).await;
                        }
                        let piece = chunk.pointer("/choices/0/delta/content").and_then(Value::as_str);
                        let finished = chunk.pointer("/choices/0/finish_reason").is_some_and(|f| !f.is_null());
                        if let Some(piece) = piece {
                            let text = answer.push(piece).to_string();
                            if !text.is_empty() {
                                self.send(Step::Text { text, check: None }).await;
                            }
                        }
                        if finished {
                            // Held until the last check: the answer is not over until it passed.
                            finish = Some(without_text(chunk));
                        } else if piece.is_none() {
                            self.send(Step::Upstream(chunk)).await;
                        }
                    }
                },
            }
        }
        self.send(Step::Finished(finish)).await;
        if let Some(checked) = last {
            self.record(answer.text(), &checked).await;
        }
        Ok(())
    }

    async fn send(&self, step: Step) {
        // A client that left is noticed by the loop's `closed` branch.
        let _ = self.sender.send(step).await;
    }

    /// The answer's verdict goes to history as the user's did: as far as it was checked, in its
    /// conversation.
    async fn record(&self, text: &str, checked: &Checked) {
        let Some(store) = &self.context.store else {
            return;
        };
        let recorded = store
            .record(&NewVerdict {
                text,
                source: self.context.source,
                user_id: self.context.user_id.as_deref(),
                import: None,
                verdict: &checked.verdict,
                templates: &checked.templates,
            })
            .await;
        if let Err(error) = recorded {
            tracing::error!(%error, "recording a streamed answer's verdict failed");
        }
    }
}

/// A finish chunk's text was read as a piece already.
fn without_text(mut chunk: Value) -> Value {
    if let Some(delta) = chunk
        .pointer_mut("/choices/0/delta")
        .and_then(Value::as_object_mut)
    {
        delta.remove("content");
    }
    chunk
}
