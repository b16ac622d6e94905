//! Requests refused before any verdict: through the router alone, on a fake model.

use aegis_server::ServerConfig;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{json, Value};

use crate::fake::{fake_router, post, send};

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

    // The router is still fine.
    let ok = json!({"user_id": "u", "question": "halo"}).to_string();
    let (status, body) = send(&router, post("/validate", JSON, ok)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
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
