use aegis_server::ServerConfig;
use serde_json::{json, Value};

use crate::common::start;

async fn expect_error(response: reqwest::Response, status: u16, code: &str) -> String {
    assert_eq!(response.status(), status, "expected {status} {code}");
    let body: Value = response.json().await.expect("error body is JSON");
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
    let server = start(ServerConfig::default(), 8).await;
    let client = reqwest::Client::new();
    let post = |path: &str, body: &'static str| {
        client
            .post(server.url(path))
            .header("content-type", "application/json")
            .body(body)
            .send()
    };

    expect_error(
        post("/validate", "{\"user_id\": \"u\", \"question\": ")
            .await
            .expect("send"),
        400,
        "malformed_json",
    )
    .await;
    let missing = expect_error(
        post("/validate", "{\"user_id\": \"u\"}")
            .await
            .expect("send"),
        422,
        "invalid_request",
    )
    .await;
    assert!(missing.contains("question"), "{missing}");
    let typed = expect_error(
        post("/chat", "{\"user_id\": \"u\", \"question\": 42}")
            .await
            .expect("send"),
        422,
        "invalid_request",
    )
    .await;
    assert!(
        typed.contains("question") || typed.contains("string"),
        "{typed}"
    );
    expect_error(
        post("/validate", "{\"user_id\": \"u\", \"question\": \"   \"}")
            .await
            .expect("send"),
        400,
        "empty_text",
    )
    .await;
    expect_error(
        post("/v1/moderations", "{\"input\": []}")
            .await
            .expect("send"),
        400,
        "empty_input",
    )
    .await;
    expect_error(
        post("/v1/moderations", "{\"input\": 7}")
            .await
            .expect("send"),
        422,
        "invalid_request",
    )
    .await;

    let long = "kata ".repeat(5000);
    let too_long = client
        .post(server.url("/validate"))
        .json(&json!({"user_id": "u", "question": long}))
        .send()
        .await
        .expect("send");
    let message = expect_error(too_long, 413, "text_too_long").await;
    assert!(message.contains("over the model's context"), "{message}");

    let huge = "a".repeat(70 * 1024);
    let too_big = client
        .post(server.url("/validate"))
        .json(&json!({"user_id": "u", "question": huge}))
        .send()
        .await
        .expect("send");
    expect_error(too_big, 413, "body_too_large").await;

    let plain = client
        .post(server.url("/validate"))
        .header("content-type", "text/plain")
        .body("halo")
        .send()
        .await
        .expect("send");
    expect_error(plain, 415, "unsupported_media_type").await;
    expect_error(
        client
            .get(server.url("/validate"))
            .send()
            .await
            .expect("send"),
        405,
        "method_not_allowed",
    )
    .await;
    expect_error(
        client.get(server.url("/nope")).send().await.expect("send"),
        404,
        "not_found",
    )
    .await;

    // The server is still fine.
    let ok = client
        .post(server.url("/validate"))
        .json(&json!({"user_id": "u", "question": "halo"}))
        .send()
        .await
        .expect("send");
    assert_eq!(ok.status(), 200);
}
