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

use aegis_guard::{GuardInput, ReceivedConversation, Role, Status, Turn, TurnsChecked, Verdict};
use aegis_runtime::{guard_stream, Step, StreamCheck, StreamContext};
use aegis_store::Source;
use aegis_upstream::{Release, StreamPolicy, Upstream, UpstreamError};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::{Stream, StreamExt};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;

use crate::error::ApiError;
use crate::json::ApiJson;
use crate::routes::{check, guard_input_error, too_many_turns};
use crate::state::AppState;

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
            return Err(too_many_turns(format!(
                "messages holds {} turns; this server takes at most {max_turns}",
                messages.len()
            )));
        }
        let turns = ReceivedConversation::parse(messages)
            .map_err(guard_input_error)?
            .turns()
            .to_vec();
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
            .map_err(guard_input_error)?;
        inputs
            .pop()
            .ok_or_else(|| ApiError::bad_request("bad_turn", "no turn to check"))
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
            sse(futures_util::stream::iter(
                chat.refusal(&question.rejection_message, report),
            ))
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
    let steps = guard_stream(
        state.worker.clone(),
        request.turns.clone(),
        deltas,
        request.policy,
        StreamContext {
            store: state.store.clone(),
            source: Source::Http,
            user_id: request.user.clone(),
            limit: state.config.request_timeout,
        },
    );
    Ok(sse(chunks_of(steps, chat)))
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
        let verdict = check(
            state,
            GuardInput::answer(request.turns.clone(), content.as_str()),
            request.user.as_deref(),
        )
        .await?;
        report["output"] = check_report(&verdict, None);
        if verdict.status == Status::Failed {
            answer["choices"][0]["message"]["content"] = json!(verdict.rejection_message);
            answer["choices"][0]["finish_reason"] = json!("content_filter");
        }
    }
    answer["aegis"] = report;
    Ok(Json(answer).into_response())
}

/// Server-sent events of `chunks`; a null is `[DONE]`.
fn sse(chunks: impl Stream<Item = Value> + Send + 'static) -> Response {
    let events = chunks.map(|chunk| {
        Ok::<_, Infallible>(if chunk.is_null() {
            Event::default().data("[DONE]")
        } else {
            Event::default().data(chunk.to_string())
        })
    });
    Sse::new(events).into_response()
}

/// A check's result as chunks carry it: the scores, and for a failure the validator, its score
/// and the character offset where the failing part begins.
fn check_report(verdict: &Verdict, span: Option<(usize, usize)>) -> Value {
    let scores: Map<String, Value> = verdict
        .results
        .iter()
        .map(|r| (r.key.clone(), json!(r.score)))
        .collect();
    let mut report = json!({
        "status": verdict.status.as_str(),
        "scores": scores,
        "latency_ms": verdict.latency_ms,
    });
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

    fn follow(&mut self, id: Option<String>, model: Option<String>, created: Option<u64>) {
        self.id = id.unwrap_or_else(|| self.id.clone());
        self.model = model.unwrap_or_else(|| self.model.clone());
        self.created = created.unwrap_or(self.created);
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

/// OpenAI's chunks for a guarded stream's steps, as they come; `[DONE]` is a null. The steps'
/// receiver lives in the response body, so a client that leaves drops it, and the relay stops.
fn chunks_of(steps: mpsc::Receiver<Step>, chat: Chunks) -> impl Stream<Item = Value> + Send {
    let start = (steps, chat, None::<Verdict>);
    futures_util::stream::unfold(start, |(mut steps, mut chat, mut last)| async move {
        let step = steps.recv().await?;
        let mut out = Vec::new();
        match step {
            Step::Named { id, model, created } => chat.follow(id, model, created),
            Step::Text { text, check } => {
                let report = check.as_ref().map(stream_report);
                last = check.map(|c| c.verdict).or(last);
                out.push(chat.chunk(json!({"content": text}), None, report));
            }
            Step::Upstream(chunk) => out.push(chunk),
            Step::Cut { check, sent_any } => {
                crate::metrics::record_verdict(&check.verdict);
                let rejection = &check.verdict.rejection_message;
                let content = if sent_any {
                    format!("\n\n{rejection}")
                } else {
                    rejection.clone()
                };
                out.push(chat.chunk(
                    json!({"content": content}),
                    None,
                    Some(stream_report(&check)),
                ));
                out.push(chat.chunk(json!({}), Some("content_filter"), None));
                out.push(Value::Null);
            }
            Step::Finished(finish) => {
                if let Some(verdict) = &last {
                    crate::metrics::record_verdict(verdict);
                }
                out.push(finish.unwrap_or_else(|| chat.chunk(json!({}), Some("stop"), None)));
                out.push(Value::Null);
            }
            Step::Failed(message) => {
                out.push(json!({"error": {"code": "stream_failed", "message": message}}));
                out.push(Value::Null);
            }
        }
        Some((futures_util::stream::iter(out), (steps, chat, last)))
    })
    .flatten()
}

fn stream_report(check: &StreamCheck) -> Value {
    check_report(&check.verdict, Some((check.offset, check.checked_chars)))
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
