//! `POST /v1/chat/completions` on the real server, relaying to a scripted upstream on 127.0.0.1
//! that streams a known answer piece by piece: where a violating sentence is cut in each release
//! mode, that a client who leaves cancels the upstream request, and that an upstream that is down
//! is a 502 with a JSON error. The guard's model is fake here (a marker word fails every
//! validator), so the cut's position is known; `crates/aegis-cli/tests/` runs the real model with
//! the official `openai` client against a real llama.cpp server.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use aegis_engine::testing::FakeModel;
use aegis_server::ServerConfig;
use aegis_upstream::Upstream;
use axum::body::Body;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Json;
use serde_json::{json, Value};

use crate::common::{start_on, TestServer};

/// The word that fails every validator on the fake model.
const MARKER: &str = "VIOLATION";

/// What the scripted upstream saw.
#[derive(Default)]
struct Seen {
    requests: AtomicUsize,
    /// The last request's body.
    body: std::sync::Mutex<Value>,
    /// Pieces it wrote before the connection went away or the answer ended.
    pieces_sent: AtomicUsize,
    /// The client went away before the answer ended.
    dropped_early: AtomicBool,
}

/// Sets `dropped_early` when the body is dropped before its last piece: hyper drops it when the
/// connection closes.
struct DropWatch {
    seen: Arc<Seen>,
    finished: bool,
}

impl DropWatch {
    fn finish(mut self) {
        self.finished = true;
    }
}

impl Drop for DropWatch {
    fn drop(&mut self) {
        if !self.finished {
            self.seen.dropped_early.store(true, Ordering::SeqCst);
        }
    }
}

/// An OpenAI-compatible server that answers every request with `pieces`, one chunk each, `gap`
/// apart; `{"stream": false}` gets them joined.
async fn scripted_upstream(pieces: Vec<String>, gap: Duration) -> (String, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let watched = seen.clone();
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        post(move |Json(body): Json<Value>| {
            let seen = watched.clone();
            let pieces = pieces.clone();
            async move {
                seen.requests.fetch_add(1, Ordering::SeqCst);
                *seen.body.lock().expect("lock") = body.clone();
                if body["stream"] != json!(true) {
                    let answer = json!({
                        "id": "up-1", "object": "chat.completion", "created": 1, "model": "scripted",
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": pieces.concat()}, "finish_reason": "stop"}],
                    });
                    return Json(answer).into_response();
                }
                let watch = DropWatch {
                    seen: seen.clone(),
                    finished: false,
                };
                let events = futures_util::stream::unfold(
                    (0usize, watch),
                    move |(next, watch)| {
                        let pieces = pieces.clone();
                        async move {
                            if next > pieces.len() {
                                watch.finish();
                                return None;
                            }
                            if next > 0 {
                                tokio::time::sleep(gap).await;
                            }
                            let event = if next == pieces.len() {
                                let last = json!({"id": "up-1", "object": "chat.completion.chunk", "created": 1, "model": "scripted",
                                    "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
                                format!("data: {last}\n\ndata: [DONE]\n\n")
                            } else {
                                let chunk = json!({"id": "up-1", "object": "chat.completion.chunk", "created": 1, "model": "scripted",
                                    "choices": [{"index": 0, "delta": {"content": pieces[next]}, "finish_reason": null}]});
                                format!("data: {chunk}\n\n")
                            };
                            watch.seen.pieces_sent.fetch_add(1, Ordering::SeqCst);
                            Some((Ok::<_, std::convert::Infallible>(event), (next + 1, watch)))
                        }
                    },
                );
                Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(Body::from_stream(events))
                    .expect("response")
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{address}"), seen)
}

/// The guard's server, relaying to `upstream`, on a model that fails any text holding [`MARKER`].
async fn guarded(upstream: &str) -> TestServer {
    let mut model = FakeModel::new(vec![(MARKER, 0.97)]);
    model.info.context_length = 4096;
    let config = ServerConfig {
        upstream: Some(Upstream::new(upstream, Some("sk-test".into())).expect("upstream")),
        ..ServerConfig::default()
    };
    start_on(Arc::new(model), config, 8).await
}

/// An answer of ten clean sentences, the violating one, then forty more pieces.
fn answer_with_violation() -> (Vec<String>, usize) {
    let mut pieces = Vec::new();
    for i in 0..10 {
        pieces.extend([format!(" Sentence {i} is"), " fine.".to_string()]);
    }
    let violation_at: usize = pieces.iter().map(|p| p.chars().count()).sum();
    pieces.extend([" This one holds".to_string(), format!(" {MARKER}.")]);
    pieces.extend((0..40).map(|i| format!(" more{i}")));
    (pieces, violation_at)
}

/// The client's view of a stream: the content it was shown, the finish reason, and the chunks.
struct Streamed {
    content: String,
    finish: Option<String>,
    chunks: Vec<Value>,
}

async fn stream(server: &TestServer, body: Value) -> Streamed {
    let mut response = reqwest::Client::new()
        .post(server.url("/v1/chat/completions"))
        .json(&body)
        .send()
        .await
        .expect("send");
    assert_eq!(response.status().as_u16(), 200);
    let mut text = String::new();
    while let Some(bytes) = response.chunk().await.expect("chunk") {
        text.push_str(&String::from_utf8_lossy(&bytes));
    }
    let mut streamed = Streamed {
        content: String::new(),
        finish: None,
        chunks: Vec::new(),
    };
    let mut done = false;
    for data in text.lines().filter_map(|l| l.strip_prefix("data: ")) {
        assert!(!done, "nothing after [DONE]: {text}");
        if data == "[DONE]" {
            done = true;
            continue;
        }
        let chunk: Value = serde_json::from_str(data).expect("a JSON chunk");
        if let Some(piece) = chunk
            .pointer("/choices/0/delta/content")
            .and_then(Value::as_str)
        {
            streamed.content.push_str(piece);
        }
        if let Some(finish) = chunk
            .pointer("/choices/0/finish_reason")
            .and_then(Value::as_str)
        {
            streamed.finish = Some(finish.to_string());
        }
        streamed.chunks.push(chunk);
    }
    assert!(done, "the stream ends with [DONE]: {text}");
    streamed
}

fn request(release: &str, stream: bool) -> Value {
    json!({
        "model": "any", "stream": stream, "user": "proto-1", "temperature": 0.2,
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Tell me about your day, please."}],
        "aegis": {"release": release},
    })
}

fn failure_report(streamed: &Streamed) -> &Value {
    streamed
        .chunks
        .iter()
        .find_map(|c| c.get("aegis").filter(|r| r["status"] == "failed"))
        .expect("a chunk reports the failing check")
}

#[tokio::test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
async fn held_back_answers_are_cut_before_the_violating_sentence_reaches_the_client() {
    let (pieces, violation_at) = answer_with_violation();
    let (url, seen) = scripted_upstream(pieces, Duration::from_millis(2)).await;
    let server = guarded(&url).await;
    let streamed = stream(&server, request("checked", true)).await;
    assert_eq!(streamed.finish.as_deref(), Some("content_filter"));
    assert!(!streamed.content.contains(MARKER), "{}", streamed.content);
    assert!(
        streamed.content.contains("Sentence 9 is fine."),
        "{}",
        streamed.content
    );
    let report = failure_report(&streamed);
    assert!(report["validator"].is_string(), "{report}");
    assert!(
        report["score"].as_f64().is_some_and(|s| s > 0.9),
        "{report}"
    );
    // The part that failed holds the marker and starts no earlier than the sentence before it.
    let offset = report["offset"].as_u64().expect("offset") as usize;
    let marker_at = violation_at + " This one holds ".len();
    assert!(
        offset <= marker_at && offset + 20 >= violation_at,
        "{report}"
    );
    // Every chunk with text in it was checked before it was sent.
    let checked: u64 = streamed
        .chunks
        .iter()
        .filter_map(|c| c.get("aegis").filter(|r| r["status"] == "passed"))
        .filter_map(|r| r["checked_chars"].as_u64())
        .max()
        .unwrap_or(0);
    assert!(
        checked as usize
            >= streamed
                .content
                .find("\n\n")
                .unwrap_or(streamed.content.len())
    );
    // The request went upstream as the client wrote it, less the guard's own field.
    let body = seen.body.lock().expect("lock").clone();
    assert_eq!(body["temperature"], json!(0.2));
    assert_eq!(body["messages"].as_array().map(Vec::len), Some(2));
    assert!(body.get("aegis").is_none(), "{body}");
    // The upstream was stopped, not read to its end.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(seen.dropped_early.load(Ordering::SeqCst));
    // History holds the user's turn and the answer as far as it was checked, failed.
    let rows = server
        .store
        .list(&Default::default(), None, 10)
        .await
        .expect("history")
        .rows;
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(
        rows.iter()
            .any(|r| r.text.contains(MARKER) && r.status == "failed"),
        "{rows:?}"
    );
}

#[tokio::test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
async fn immediate_answers_are_cut_soon_after_the_violating_sentence() {
    let (pieces, _) = answer_with_violation();
    let total = pieces.len();
    let (url, seen) = scripted_upstream(pieces, Duration::from_millis(20)).await;
    let server = guarded(&url).await;
    let streamed = stream(&server, request("immediate", true)).await;
    assert_eq!(streamed.finish.as_deref(), Some("content_filter"));
    // Sent as it came, so the client saw the sentence; the rest was cut.
    assert!(streamed.content.contains(MARKER), "{}", streamed.content);
    assert!(!streamed.content.contains("more39"), "{}", streamed.content);
    let report = failure_report(&streamed);
    assert!(report["offset"].is_u64(), "{report}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(seen.dropped_early.load(Ordering::SeqCst));
    assert!(seen.pieces_sent.load(Ordering::SeqCst) < total);
}

#[tokio::test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
async fn clean_answers_stream_in_several_chunks_and_end_normally() {
    let pieces: Vec<String> = (0..12).map(|i| format!(" Line {i} is fine.")).collect();
    let whole = pieces.concat();
    let (url, _seen) = scripted_upstream(pieces, Duration::from_millis(1)).await;
    let server = guarded(&url).await;
    for release in ["checked", "immediate"] {
        let streamed = stream(&server, request(release, true)).await;
        assert_eq!(streamed.content, whole, "{release}");
        assert_eq!(streamed.finish.as_deref(), Some("stop"), "{release}");
        let with_text = streamed
            .chunks
            .iter()
            .filter(|c| {
                c.pointer("/choices/0/delta/content")
                    .and_then(Value::as_str)
                    .is_some_and(|t| !t.is_empty())
            })
            .count();
        assert!(with_text > 1, "{release}: {with_text} chunks");
    }
    let whole_answer = server
        .post_json("/v1/chat/completions", &request("checked", false))
        .await;
    assert_eq!(
        whole_answer["choices"][0]["message"]["content"],
        json!(whole)
    );
    assert_eq!(whole_answer["aegis"]["output"]["status"], json!("passed"));
}

#[tokio::test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
async fn a_failing_question_never_goes_upstream() {
    let (url, seen) = scripted_upstream(vec!["Hi.".into()], Duration::ZERO).await;
    let server = guarded(&url).await;
    let mut body = request("checked", true);
    body["messages"][1]["content"] = json!(format!("Write me a {MARKER} please"));
    let streamed = stream(&server, body.clone()).await;
    assert_eq!(streamed.finish.as_deref(), Some("content_filter"));
    assert!(!streamed.content.is_empty());
    body["stream"] = json!(false);
    let whole = server.post_json("/v1/chat/completions", &body).await;
    assert_eq!(
        whole["choices"][0]["finish_reason"],
        json!("content_filter")
    );
    assert_eq!(whole["aegis"]["input"]["status"], json!("failed"));
    assert_eq!(seen.requests.load(Ordering::SeqCst), 0);
}

#[tokio::test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
async fn a_whole_answer_that_fails_is_replaced_by_the_rejection() {
    let (pieces, _) = answer_with_violation();
    let (url, _seen) = scripted_upstream(pieces, Duration::ZERO).await;
    let server = guarded(&url).await;
    let whole = server
        .post_json("/v1/chat/completions", &request("checked", false))
        .await;
    let content = whole["choices"][0]["message"]["content"]
        .as_str()
        .expect("content");
    assert!(!content.contains(MARKER), "{whole}");
    assert_eq!(
        whole["choices"][0]["finish_reason"],
        json!("content_filter")
    );
    assert_eq!(whole["aegis"]["output"]["status"], json!("failed"));
}

#[tokio::test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
async fn a_client_that_leaves_cancels_the_upstream_request() {
    let pieces: Vec<String> = (0..400).map(|i| format!(" word{i}")).collect();
    let (url, seen) = scripted_upstream(pieces, Duration::from_millis(10)).await;
    let server = guarded(&url).await;
    let mut response = reqwest::Client::new()
        .post(server.url("/v1/chat/completions"))
        .json(&request("immediate", true))
        .send()
        .await
        .expect("send");
    let first = response.chunk().await.expect("chunk");
    assert!(first.is_some());
    drop(response);
    let mut waited = Duration::ZERO;
    while !seen.dropped_early.load(Ordering::SeqCst) && waited < Duration::from_secs(3) {
        tokio::time::sleep(Duration::from_millis(20)).await;
        waited += Duration::from_millis(20);
    }
    assert!(
        seen.dropped_early.load(Ordering::SeqCst),
        "the upstream is still streaming"
    );
    assert!(seen.pieces_sent.load(Ordering::SeqCst) < 200);
}

#[tokio::test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
async fn an_upstream_that_is_down_is_a_502_with_a_json_error() {
    // A port that was free a moment ago: nothing listens there.
    let free = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", free.local_addr().expect("address"));
    drop(free);
    let server = guarded(&url).await;
    for stream in [false, true] {
        let response = reqwest::Client::new()
            .post(server.url("/v1/chat/completions"))
            .json(&request("checked", stream))
            .send()
            .await
            .expect("send");
        assert_eq!(response.status().as_u16(), 502);
        let body: Value = response.json().await.expect("JSON");
        assert_eq!(
            body["error"]["code"],
            json!("upstream_unreachable"),
            "{body}"
        );
    }
}

#[tokio::test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
async fn bad_requests_are_refused_before_anything_goes_upstream() {
    let (url, seen) = scripted_upstream(vec!["Hi.".into()], Duration::ZERO).await;
    let server = guarded(&url).await;
    for (body, code) in [
        (json!({"model": "m"}), "invalid_request"),
        (
            json!({"messages": [{"role": "user", "content": "hi"}], "n": 2}),
            "bad_request",
        ),
        (
            json!({"messages": [{"role": "user", "content": "hi"}], "aegis": {"release": "later"}}),
            "bad_guard_options",
        ),
        (
            json!({"messages": [{"role": "user", "content": "hi"}], "aegis": {"check_every": 0}}),
            "bad_guard_options",
        ),
        (
            json!({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}),
            "bad_turn",
        ),
        (
            json!({"messages": [{"role": "user", "content": "  "}]}),
            "bad_turn",
        ),
    ] {
        let answer = server.post_json("/v1/chat/completions", &body).await;
        assert_eq!(answer["error"]["code"], json!(code), "{body}: {answer}");
    }
    assert_eq!(seen.requests.load(Ordering::SeqCst), 0);
}
