//! `POST /v1/chat/completions` with `--upstream`: a prototype's chatbot behind the guard, in the
//! shape its OpenAI client already speaks. The user's turn is checked in its conversation before
//! anything goes upstream, and a failing one never does; the answer is checked in the
//! conversation as it is written (see `aegis_upstream::GrowingAnswer`), and a failing answer ends
//! with the rejection and `finish_reason: "content_filter"`, as Azure OpenAI ends a filtered one.
//! Chunks that carry a check say so in an `aegis` field; every exchange goes to history, the
//! answer as far as it was checked.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use aegis_guard::{GuardInput, Role, Status, Turn, TurnsChecked, Verdict};
use aegis_runtime::{Checked, WorkerError};
use aegis_store::{NewVerdict, Source};
use aegis_upstream::{
    CheckPoint, Deltas, GrowingAnswer, Release, StreamPolicy, Upstream, UpstreamError,
};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::error::{worker_error, ApiError};
use crate::json::ApiJson;
use crate::routes::{check, conversation_turns};
use crate::state::AppState;

/// The most checks one streamed answer may run: a check every sentence of a long essay.
const CHANNEL_DEPTH: usize = 64;

/// The request's own field for the guard; removed before the request goes upstream.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct GuardOptions {
    #[serde(default)]
    release: Release,
    check_every: Option<usize>,
}

/// What the handler reads of the request; the rest goes upstream as the client wrote it.
struct CompletionRequest {
    forwarded: Value,
    turns: Vec<Turn>,
    stream: bool,
    user: Option<String>,
    model: String,
    policy: StreamPolicy,
}

impl CompletionRequest {
    fn read(mut body: Map<String, Value>, max_turns: usize) -> Result<Self, ApiError> {
        let options: GuardOptions = match body.remove("aegis") {
            None => GuardOptions::default(),
            Some(options) => serde_json::from_value(options).map_err(|e| {
                ApiError::bad_request(
                    "bad_guard_options",
                    format!("aegis: {e}; give release (checked or immediate) and check_every"),
                )
            })?,
        };
        let check_every = options
            .check_every
            .unwrap_or(aegis_upstream::DEFAULT_CHECK_EVERY);
        if check_every == 0 {
            return Err(ApiError::bad_request(
                "bad_guard_options",
                "aegis.check_every must be at least 1",
            ));
        }
        let stream = match body.get("stream") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(stream)) => *stream,
            Some(_) => {
                return Err(ApiError::bad_request(
                    "bad_request",
                    "stream must be true or false",
                ))
            }
        };
        if body
            .get("n")
            .and_then(Value::as_u64)
            .is_some_and(|n| n != 1)
        {
            return Err(ApiError::bad_request(
                "bad_request",
                "n must be 1: the guard checks one answer",
            ));
        }
        let messages = body
            .get("messages")
            .and_then(Value::as_array)
            .ok_or_else(|| {
                ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "invalid_request",
                    "missing field `messages`: a list of {role, content} turns",
                )
            })?;
        if messages.len() > max_turns {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_many_turns",
                format!(
                    "messages holds {} turns; this server takes at most {max_turns}",
                    messages.len()
                ),
            ));
        }
        let (turns, _) = conversation_turns(messages)
            .map_err(|e| ApiError::bad_request("bad_turn", e.to_string()))?;
        if turns.last().is_none_or(|t| t.role != Role::User) {
            return Err(ApiError::bad_request(
                "bad_turn",
                "the conversation must end with the user's turn: it is checked before the upstream answers it",
            ));
        }
        let user = body.get("user").and_then(Value::as_str).map(str::to_string);
        let model = body
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("aegis")
            .to_string();
        Ok(Self {
            forwarded: Value::Object(body),
            turns,
            stream,
            user,
            model,
            policy: StreamPolicy {
                release: options.release,
                check_every,
            },
        })
    }

    /// The user's turn, in the turns before it.
    fn question(&self) -> Result<GuardInput, ApiError> {
        let mut inputs = GuardInput::from_conversation(&self.turns, TurnsChecked::Last)
            .map_err(|e| ApiError::bad_request("bad_turn", e.to_string()))?;
        inputs
            .pop()
            .ok_or_else(|| ApiError::bad_request("bad_turn", "no turn to check"))
    }

    /// The assistant's answer, so far, in the conversation it answers.
    fn answer(&self, text: &str) -> GuardInput {
        GuardInput {
            context: self.turns.clone().into(),
            turn: Turn::assistant(text),
            index: self.turns.len(),
        }
    }
}

/// OpenAI's chat completions, relayed to the upstream through the guard: the user's turn is
/// checked first, the answer as it is written. `"aegis": {"release": "checked" | "immediate",
/// "check_every": N}` chooses how a stream is released; a filtered answer ends with the rejection
/// and `finish_reason: "content_filter"`.
#[utoipa::path(post, path = "/v1/chat/completions", request_body = Object, responses(
    (status = 200, description = "A chat completion, or with \"stream\": true its chunks as server-sent events; checks are reported in an `aegis` field", body = Object),
    (status = 429, description = "The upstream is busy (upstream_busy); see Retry-After", body = crate::error::ErrorBody),
    (status = 502, description = "The upstream cannot be reached or failed (upstream_unreachable, upstream_failed)", body = crate::error::ErrorBody)))]
pub(crate) async fn chat_completions(
    State(state): State<Arc<AppState>>,
    ApiJson(body): ApiJson<Map<String, Value>>,
) -> Result<Response, ApiError> {
    let Some(upstream) = state.config.upstream.clone() else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "no_upstream",
            "this server has no upstream: start it with --upstream URL (an OpenAI-compatible server) to answer chat completions",
        ));
    };
    let request = CompletionRequest::read(body, state.config.max_turns)?;
    let question = check(&state, request.question()?, request.user.as_deref()).await?;
    let chat = Chunks::ours(&request.model);
    if question.status == Status::Failed {
        let report = json!({"input": check_report(&question, None)});
        return Ok(if request.stream {
            let (sender, events) = mpsc::channel(4);
            // The channel holds them all, so nothing waits.
            for chunk in chat.refusal(&question.rejection_message, report) {
                let _ = sender.try_send(chunk);
            }
            sse(events)
        } else {
            Json(chat.whole(&question.rejection_message, "content_filter", report)).into_response()
        });
    }
    if !request.stream {
        return answer_whole(&state, &upstream, &request, &question).await;
    }
    let deltas = upstream
        .stream(&request.forwarded)
        .await
        .map_err(upstream_error)?;
    let (sender, events) = mpsc::channel(CHANNEL_DEPTH);
    let timeout = state.config.request_timeout;
    tokio::spawn(async move {
        let relay = Relay {
            state,
            request,
            sender,
            chunks: chat,
        };
        relay.run(deltas, timeout).await;
    });
    Ok(sse(events))
}

async fn answer_whole(
    state: &AppState,
    upstream: &Upstream,
    request: &CompletionRequest,
    question: &Verdict,
) -> Result<Response, ApiError> {
    let mut answer = upstream
        .complete(&request.forwarded)
        .await
        .map_err(upstream_error)?;
    let content = answer
        .pointer("/choices/0/message/content")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let mut report = json!({"input": check_report(question, None)});
    if !content.trim().is_empty() {
        let verdict = check(state, request.answer(&content), request.user.as_deref()).await?;
        report["output"] = check_report(&verdict, None);
        if verdict.status == Status::Failed {
            answer["choices"][0]["message"]["content"] = json!(verdict.rejection_message);
            answer["choices"][0]["finish_reason"] = json!("content_filter");
        }
    }
    answer["aegis"] = report;
    Ok(Json(answer).into_response())
}

fn sse(events: mpsc::Receiver<Value>) -> Response {
    let stream = futures_util::stream::unfold(events, |mut events| async move {
        let chunk = events.recv().await?;
        let event = if chunk.is_null() {
            Event::default().data("[DONE]")
        } else {
            Event::default().data(chunk.to_string())
        };
        Some((Ok::<_, Infallible>(event), events))
    });
    Sse::new(stream).into_response()
}

/// A check's result as chunks carry it: the scores, and for a failure the validator, its score
/// and the character offset where the failing part begins.
fn check_report(verdict: &Verdict, span: Option<(usize, usize)>) -> Value {
    let scores: Map<String, Value> = verdict
        .results
        .iter()
        .map(|r| (r.key.clone(), json!(r.score)))
        .collect();
    let mut report = json!({"status": verdict.status.as_str(), "scores": scores});
    if let Some(failed) = verdict.results.iter().find(|r| !r.passed) {
        report["validator"] = json!(failed.key);
        report["score"] = json!(failed.score);
    }
    if let Some((offset, checked_chars)) = span {
        report["checked_chars"] = json!(checked_chars);
        if verdict.status == Status::Failed {
            report["offset"] = json!(offset);
        }
    }
    report
}

/// Chunks in OpenAI's shape, named as the upstream names its own (id, model, created).
#[derive(Debug, Clone)]
struct Chunks {
    id: String,
    model: String,
    created: u64,
}

impl Chunks {
    fn ours(model: &str) -> Self {
        let created = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Self {
            id: format!("chatcmpl-aegis-{created}"),
            model: model.to_string(),
            created,
        }
    }

    fn follow(&mut self, upstream: &Value) {
        if let Some(id) = upstream.get("id").and_then(Value::as_str) {
            self.id = id.to_string();
        }
        if let Some(model) = upstream.get("model").and_then(Value::as_str) {
            self.model = model.to_string();
        }
        if let Some(created) = upstream.get("created").and_then(Value::as_u64) {
            self.created = created;
        }
    }

    fn chunk(&self, delta: Value, finish: Option<&str>, report: Option<Value>) -> Value {
        let mut chunk = json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        });
        if let Some(report) = report {
            chunk["aegis"] = report;
        }
        chunk
    }

    /// A stream that is only the rejection: the chunks, then `[DONE]` (a null).
    fn refusal(&self, rejection: &str, report: Value) -> Vec<Value> {
        vec![
            self.chunk(
                json!({"role": "assistant", "content": rejection}),
                None,
                Some(report),
            ),
            self.chunk(json!({}), Some("content_filter"), None),
            Value::Null,
        ]
    }

    fn whole(&self, content: &str, finish: &str, report: Value) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish,
            }],
            "aegis": report,
        })
    }
}

/// One streamed answer, from the upstream through the checks to the client.
struct Relay {
    state: Arc<AppState>,
    request: CompletionRequest,
    sender: mpsc::Sender<Value>,
    chunks: Chunks,
}

/// How a relay ended, for the log.
enum Ended {
    Answered,
    Cut,
    ClientLeft,
    Failed(String),
}

impl Relay {
    async fn run(mut self, deltas: Deltas, limit: std::time::Duration) {
        let sender = self.sender.clone();
        let ended = match tokio::time::timeout(limit, self.relay(deltas)).await {
            Ok(ended) => ended,
            Err(_) => Ended::Failed(format!("the answer took longer than {} s", limit.as_secs())),
        };
        match ended {
            Ended::Answered | Ended::Cut => {}
            Ended::ClientLeft => {
                tracing::debug!("a streaming client left; the upstream request was dropped")
            }
            Ended::Failed(message) => {
                tracing::warn!(%message, "a guarded stream failed");
                let error = json!({"error": {"code": "stream_failed", "message": message}});
                let _ = sender.send(error).await;
                let _ = sender.send(Value::Null).await;
            }
        }
    }

    async fn relay(&mut self, mut deltas: Deltas) -> Ended {
        let mut answer = GrowingAnswer::new(self.request.policy);
        let mut running: Option<(CheckPoint, JoinHandle<Result<Checked, WorkerError>>)> = None;
        let mut last: Option<Checked> = None;
        let mut finish: Option<Value> = None;
        let mut upstream_done = false;
        loop {
            if running.is_none() {
                if let Some(point) = answer.due(upstream_done) {
                    let state = self.state.clone();
                    let input = self.request.answer(&answer.text()[..point.upto]);
                    running = Some((
                        point,
                        tokio::spawn(async move { state.worker.check(input).await }),
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
                    return Ended::ClientLeft;
                }
                joined = async { running.as_mut().map(|(_, check)| check).expect("guarded").await }, if running.is_some() => {
                    let Some((point, _)) = running.take() else { continue };
                    let checked = match joined {
                        Ok(Ok(checked)) => checked,
                        Ok(Err(error)) => return Ended::Failed(worker_error(error).message),
                        Err(join) => return Ended::Failed(format!("a check failed: {join}")),
                    };
                    let text = answer.text();
                    let span = (text[..point.from].chars().count(), text[..point.upto].chars().count());
                    let report = check_report(&checked.verdict, Some(span));
                    if checked.verdict.status == Status::Failed {
                        let sent_any = answer.released() > 0;
                        self.cut(&checked, report, sent_any).await;
                        self.record(&answer.text()[..point.upto], &checked).await;
                        return Ended::Cut;
                    }
                    let released = answer.passed(point).to_string();
                    self.send(self.chunks.chunk(json!({"content": released}), None, Some(report))).await;
                    last = Some(checked);
                }
                next = deltas.next(), if !upstream_done => match next {
                    None => upstream_done = true,
                    Some(Err(error)) => return Ended::Failed(error.to_string()),
                    Some(Ok(chunk)) => {
                        self.chunks.follow(&chunk);
                        let delta = chunk.pointer("/choices/0/delta/content").and_then(Value::as_str);
                        let finished = chunk.pointer("/choices/0/finish_reason").is_some_and(|f| !f.is_null());
                        if let Some(piece) = delta {
                            let released = answer.push(piece).to_string();
                            if !released.is_empty() {
                                self.send(self.chunks.chunk(json!({"content": released}), None, None)).await;
                            }
                        }
                        if finished {
                            // Sent after the last check: the answer is not over until it passed.
                            finish = Some(chunk);
                        } else if delta.is_none() {
                            // The role, usage or a field the guard does not read.
                            self.send(chunk).await;
                        }
                    }
                },
            }
        }
        let finish = finish.map_or_else(
            || self.chunks.chunk(json!({}), Some("stop"), None),
            |mut chunk| {
                if let Some(delta) = chunk.pointer_mut("/choices/0/delta") {
                    // Its text, if any, was read as a piece above.
                    delta.as_object_mut().map(|d| d.remove("content"));
                }
                chunk
            },
        );
        self.send(finish).await;
        self.send(Value::Null).await;
        if let Some(checked) = last {
            self.record(answer.text(), &checked).await;
        }
        Ended::Answered
    }

    async fn send(&self, chunk: Value) {
        // A client that left is noticed by the loop's `closed` branch.
        let _ = self.sender.send(chunk).await;
    }

    /// Ends the stream with the rejection in place of the rest.
    async fn cut(&self, checked: &Checked, report: Value, sent_any: bool) {
        let rejection = &checked.verdict.rejection_message;
        let content = if sent_any {
            format!("\n\n{rejection}")
        } else {
            rejection.clone()
        };
        self.send(
            self.chunks
                .chunk(json!({"content": content}), None, Some(report)),
        )
        .await;
        self.send(self.chunks.chunk(json!({}), Some("content_filter"), None))
            .await;
        self.send(Value::Null).await;
    }

    /// The answer's verdict goes to history as the user's did: as far as it was checked, in its
    /// conversation.
    async fn record(&self, text: &str, checked: &Checked) {
        crate::metrics::record_verdict(&checked.verdict);
        let Some(store) = &self.state.store else {
            return;
        };
        let recorded = store
            .record(&NewVerdict {
                text,
                source: Source::Http,
                user_id: self.request.user.as_deref(),
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

fn upstream_error(error: UpstreamError) -> ApiError {
    match &error {
        UpstreamError::Refused { status: 429, .. } => ApiError {
            retry_after: Some(5),
            ..ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "upstream_busy",
                error.to_string(),
            )
        },
        UpstreamError::Refused {
            status: status @ (400 | 404 | 413 | 422),
            ..
        } => ApiError::new(
            StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_GATEWAY),
            "upstream_refused",
            error.to_string(),
        ),
        UpstreamError::Refused { .. } | UpstreamError::Malformed(_) | UpstreamError::BadUrl(_) => {
            ApiError::new(
                StatusCode::BAD_GATEWAY,
                "upstream_failed",
                error.to_string(),
            )
        }
        UpstreamError::Unreachable { .. } => ApiError {
            retry_after: Some(5),
            ..ApiError::new(
                StatusCode::BAD_GATEWAY,
                "upstream_unreachable",
                error.to_string(),
            )
        },
    }
}
