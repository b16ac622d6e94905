//! `POST /feedback` on the real server: a reported mistake becomes a proposed example in the real
//! history, behind the token, trained on only once accepted; bad input is answered with 4xx JSON.

use aegis_server::ServerConfig;
use serde_json::{json, Value};

use crate::common::{start, TestServer};

async fn post(server: &TestServer, token: Option<&str>, body: &str) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .post(server.url("/feedback"))
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("send");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
async fn feedback_becomes_an_example_behind_the_token() {
    let server = start(
        ServerConfig {
            token: Some("s3cret".into()),
            ..ServerConfig::default()
        },
        8,
    )
    .await;
    let client = reqwest::Client::new();
    let checked = client
        .post(server.url("/validate"))
        .bearer_auth("s3cret")
        .json(&json!({"user_id": "proto", "question": "Pesanan saya belum sampai, tolong dicek"}))
        .send()
        .await
        .expect("validate");
    assert_eq!(checked.status().as_u16(), 200);
    let recorded = server
        .store
        .list(&Default::default(), None, 10)
        .await
        .expect("history");
    let verdict_id = recorded.rows[0].verdict_id;

    let body =
        json!({"validator": "spam", "violates": false, "verdict_id": verdict_id}).to_string();
    let (status, answer) = post(&server, None, &body).await;
    assert_eq!(status, 401, "{answer}");
    let (status, answer) = post(&server, Some("s3cret"), &body).await;
    assert_eq!(status, 201, "{answer}");
    assert_eq!(answer["merged"], json!(false));
    let (status, again) = post(&server, Some("s3cret"), &body).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["example_id"], answer["example_id"]);
    assert_eq!(again["merged"], json!(true));

    let by_text =
        json!({"validator": "toxic", "violates": true, "text": "dasar kamu sampah", "lang": "id"});
    let (status, answer) = post(&server, Some("s3cret"), &by_text.to_string()).await;
    assert_eq!(status, 201, "{answer}");

    let examples = server.store.examples(None).await.expect("examples");
    assert_eq!(examples.len(), 2);
    let spam = examples
        .iter()
        .find(|e| e.validator == "spam")
        .expect("spam");
    assert_eq!(spam.text, "Pesanan saya belum sampai, tolong dicek");
    assert_eq!(spam.verdict_id, Some(verdict_id));
    assert_eq!(spam.times_added, 2);
    assert!(!spam.violates);
    assert_eq!(spam.origin.as_str(), "feedback");
    assert!(examples.iter().all(|e| e.pending), "{examples:?}");
    assert_eq!(spam.submitted_by.as_deref(), Some("127.0.0.1"));
    assert_eq!(answer["pending"], json!(true));

    // Proposals are not training rows until a reviewer accepts them.
    assert!(aegis_teach::taught_rows(examples.clone()).is_empty());
    assert!(server
        .store
        .accept_example("ana", spam.id)
        .await
        .expect("accept"));
    let taught = aegis_teach::taught_rows(server.store.examples(None).await.expect("examples"));
    assert_eq!(taught.len(), 1);
    assert_eq!(taught[0].text, spam.text);
}

#[tokio::test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
async fn bad_feedback_is_refused_with_json_and_keeps_nothing() {
    let server = start(ServerConfig::default(), 8).await;
    for (body, status, code) in [
        (
            json!({"validator": "nope", "violates": true, "text": "x"}).to_string(),
            422,
            "unknown_validator",
        ),
        (
            json!({"validator": "spam", "violates": true}).to_string(),
            422,
            "invalid_request",
        ),
        (
            json!({"validator": "spam", "violates": true, "text": "x", "verdict_id": 1})
                .to_string(),
            422,
            "invalid_request",
        ),
        (
            json!({"validator": "spam", "violates": true, "text": "  "}).to_string(),
            400,
            "empty_text",
        ),
        (
            json!({"validator": "spam", "violates": true, "verdict_id": 9999}).to_string(),
            404,
            "verdict_not_found",
        ),
        (
            json!({"validator": "spam", "violates": "yes", "text": "x"}).to_string(),
            422,
            "invalid_request",
        ),
        (
            json!({"validator": "spam", "violates": true, "text": "x", "extra": 1}).to_string(),
            422,
            "invalid_request",
        ),
        ("{\"validator\": ".to_string(), 400, "malformed_json"),
        (
            json!({"validator": "spam", "violates": true, "text": "x", "lang": "../../etc"})
                .to_string(),
            422,
            "unknown_language",
        ),
        (
            // Refused with a recorded verdict too, where the language is not read from the body.
            json!({"validator": "spam", "violates": true, "verdict_id": 9999, "lang": "xx"})
                .to_string(),
            422,
            "unknown_language",
        ),
        (
            json!({"validator": "spam", "violates": true, "text": "x".repeat(40_000)}).to_string(),
            422,
            "invalid_example",
        ),
    ] {
        let (got, answer) = post(&server, None, &body).await;
        assert_eq!(got, status, "{body:.80}: {answer}");
        assert_eq!(answer["error"]["code"], json!(code), "{body:.80}: {answer}");
    }
    assert!(server
        .store
        .examples(None)
        .await
        .expect("examples")
        .is_empty());
}
