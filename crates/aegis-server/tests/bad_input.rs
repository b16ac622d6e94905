//! Requests refused before any verdict: through the router alone, on a fake model.

use aegis_server::ServerConfig;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{json, Value};

use crate::fake::{fake_router, fake_router_on, post, send};

const JSON: &str = "application/json";

/// The error's message, after checking the status and code every error answers with.
fn expect_error(answer: (StatusCode, Value), status: u16, code: &str) -> String {
    let (got, body) = answer;
    let shown: String = body.to_string().chars().take(300).collect();
    assert_eq!(got.as_u16(), status, "expected {status} {code}: {shown}");
    assert_eq!(body["error"]["code"], code, "{body}");
    let message = body["error"]["message"]
        .as_str()
        .expect("message")
        .to_string();
    assert!(!message.is_empty());
    message
}

#[tokio::test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
async fn every_bad_request_gets_a_clear_4xx_in_one_shape() {
    let router = fake_router(ServerConfig::default()).await;
    let call = |path: &'static str, body: &'static str| send(&router, post(path, JSON, body));

    expect_error(
        call("/validate", "{\"user_id\": \"u\", \"question\": ").await,
        400,
        "malformed_json",
    );
    let missing = expect_error(
        call("/validate", "{\"user_id\": \"u\"}").await,
        422,
        "invalid_request",
    );
    assert!(missing.contains("question"), "{missing}");
    let typed = expect_error(
        call("/chat", "{\"user_id\": \"u\", \"question\": 42}").await,
        422,
        "invalid_request",
    );
    assert!(
        typed.contains("question") || typed.contains("string"),
        "{typed}"
    );
    expect_error(
        call("/validate", "{\"user_id\": \"u\", \"question\": \"   \"}").await,
        400,
        "empty_text",
    );
    expect_error(
        call("/v1/moderations", "{\"input\": []}").await,
        400,
        "empty_input",
    );
    expect_error(
        call("/v1/moderations", "{\"input\": 7}").await,
        422,
        "invalid_request",
    );

    let long = json!({"user_id": "u", "question": "kata ".repeat(5000)}).to_string();
    let message = expect_error(
        send(&router, post("/validate", JSON, long)).await,
        413,
        "text_too_long",
    );
    assert!(message.contains("over the model's context"), "{message}");
    let huge = json!({"user_id": "u", "question": "a".repeat(70 * 1024)}).to_string();
    expect_error(
        send(&router, post("/validate", JSON, huge)).await,
        413,
        "body_too_large",
    );
    expect_error(
        send(&router, post("/validate", "text/plain", "halo")).await,
        415,
        "unsupported_media_type",
    );
    let get = |path: &str| Request::get(path).body(Body::empty()).expect("request");
    expect_error(
        send(&router, get("/validate")).await,
        405,
        "method_not_allowed",
    );
    expect_error(send(&router, get("/nope")).await, 404, "not_found");
    // An answer checks the last turn only: the description forbids it with "turns": "all" on
    // both endpoints that take the body, so /validate, which writes no answer, refuses it too.
    let answer_all = r#"{"user_id": "u", "answer": true, "turns": "all", "question": "halo"}"#;
    for path in ["/validate", "/chat"] {
        expect_error(call(path, answer_all).await, 400, "bad_request");
    }

    // The router is still fine.
    let ok = json!({"user_id": "u", "question": "halo"}).to_string();
    let (status, body) = send(&router, post("/validate", JSON, ok)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
async fn a_token_guards_everything_but_health() {
    let router = fake_router(ServerConfig {
        token: Some("s3cret-token".into()),
        ..ServerConfig::default()
    })
    .await;
    let body = json!({"user_id": "u", "question": "halo"}).to_string();
    let validate = |token: Option<&str>| {
        let mut request = Request::post("/validate").header("content-type", JSON);
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        request.body(Body::from(body.clone())).expect("request")
    };
    let unauthorized = |answer| expect_error(answer, 401, "unauthorized");
    unauthorized(send(&router, validate(None)).await);
    unauthorized(send(&router, validate(Some("s3cret-tokeN"))).await);
    let (status, answer) = send(&router, validate(Some("s3cret-token"))).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let get = |path: &str| Request::get(path).body(Body::empty()).expect("request");
    unauthorized(send(&router, get("/validators")).await);
    assert_eq!(send(&router, get("/health")).await.0, StatusCode::OK);
}

#[tokio::test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
async fn a_foreign_host_or_page_is_refused_before_the_body_is_read() {
    let router = fake_router(ServerConfig {
        cors_origins: vec!["http://localhost:5173".into()],
        allowed_hosts: vec!["guard.internal".into()],
        ..ServerConfig::default()
    })
    .await;
    let feedback = json!({"validator": "toxic", "violates": true, "text": "halo"}).to_string();
    let request = |host: &str, origin: Option<&str>| {
        let mut request = Request::post("/feedback")
            .header("content-type", JSON)
            .header("host", host);
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request.body(Body::from(feedback.clone())).expect("request")
    };
    // DNS rebinding: the attacker's name, resolved to 127.0.0.1.
    let message = expect_error(
        send(&router, request("attacker.example:8000", None)).await,
        403,
        "host_not_allowed",
    );
    assert!(message.contains("--allowed-host"), "{message}");
    expect_error(
        send(
            &router,
            request("127.0.0.1:8000", Some("http://attacker.example")),
        )
        .await,
        403,
        "origin_not_allowed",
    );
    expect_error(
        send(&router, request("localhost:8000", Some("null"))).await,
        403,
        "origin_not_allowed",
    );
    // Past the check, the request is read: this server keeps no history.
    for (host, origin) in [
        ("127.0.0.1:8000", None),
        ("localhost:8000", Some("http://localhost:5173")),
        ("guard.internal", None),
        ("[::1]:8000", None),
    ] {
        let (status, body) = send(&router, request(host, origin)).await;
        assert_eq!(status.as_u16(), 503, "{host} {origin:?}: {body}");
        assert_eq!(body["error"]["code"], "history_off", "{body}");
    }
}

#[tokio::test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
async fn any_page_may_call_when_the_operator_says_star() {
    let router = fake_router(ServerConfig {
        cors_origins: vec!["*".into()],
        ..ServerConfig::default()
    })
    .await;
    let preflight = Request::options("/validate")
        .header("origin", "https://prototype.example")
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "content-type")
        .body(Body::empty())
        .expect("request");
    let response = tower::ServiceExt::oneshot(router.clone(), preflight)
        .await
        .expect("infallible");
    assert!(response.status().is_success(), "{}", response.status());
    assert_eq!(
        response.headers()["access-control-allow-origin"],
        "*",
        "{:?}",
        response.headers()
    );
}

#[test]
fn a_configuration_the_server_cannot_honour_is_refused() {
    use aegis_server::ConfigError;
    let blank = ServerConfig {
        token: Some("  ".into()),
        ..ServerConfig::default()
    };
    assert_eq!(blank.check(), Err(ConfigError::BlankToken));
    let origin = ServerConfig {
        cors_origins: vec!["localhost:5173".into()],
        ..ServerConfig::default()
    };
    assert!(matches!(origin.check(), Err(ConfigError::BadOrigin(_))));
    let star = ServerConfig {
        cors_origins: vec!["*".into()],
        ..ServerConfig::default()
    };
    assert_eq!(star.check(), Ok(()));
    for answer_tokens in [0, 5000] {
        let answers = ServerConfig {
            answer_tokens,
            ..ServerConfig::default()
        };
        assert_eq!(
            answers.check(),
            Err(ConfigError::AnswerTokens(answer_tokens))
        );
    }
}

#[tokio::test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
async fn too_many_turns_are_refused_naming_the_limit_before_any_work() {
    let router = fake_router(ServerConfig::default()).await;
    let limits = ServerConfig::default();
    let conversation = |n: usize| -> Vec<Value> {
        (0..n)
            .map(|i| {
                let role = if i % 2 == 0 { "user" } else { "assistant" };
                json!({"role": role, "content": format!("pesan {i}")})
            })
            .collect()
    };
    let body = |n: usize, turns: &str| {
        json!({"user_id": "u", "messages": conversation(n), "turns": turns}).to_string()
    };
    for (path, turns, limit) in [
        ("/validate", "last", limits.max_turns),
        ("/chat", "all", limits.max_checked_turns),
    ] {
        let message = expect_error(
            send(&router, post(path, JSON, body(limit + 1, turns))).await,
            413,
            "too_many_turns",
        );
        assert!(message.contains(&limit.to_string()), "{path}: {message}");
    }
    let (status, answer) = send(
        &router,
        post("/chat", JSON, body(limits.max_turns - 1, "last")),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
}

#[tokio::test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
async fn a_panicking_check_gets_500_naming_it_and_the_next_check_works() {
    let mut model = aegis_engine::testing::FakeModel::new(vec![]);
    model.panics_on = Some("KABOOM");
    let router = fake_router_on(model, ServerConfig::default()).await;
    let ask = |question: &str| {
        post(
            "/validate",
            JSON,
            json!({"user_id": "u", "question": question}).to_string(),
        )
    };
    let message = expect_error(send(&router, ask("KABOOM")).await, 500, "internal_error");
    assert!(message.contains("KABOOM"), "{message}");
    let (status, body) = send(&router, ask("halo, apa kabar?")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let get = Request::get("/health")
        .body(Body::empty())
        .expect("request");
    let (_, health) = send(&router, get).await;
    assert_eq!(health["status"], "healthy", "{health}");
    assert_eq!(health["model"]["state"], "ready", "{health}");
}
