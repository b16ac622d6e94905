use std::collections::BTreeSet;

use aegis_server::ServerConfig;
use aegis_store::HistoryFilter;
use serde_json::{json, Value};

use crate::common::start;

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().expect("object").keys().cloned().collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
async fn original_endpoints_keep_their_shapes_and_every_request_is_recorded() {
    let server = start(ServerConfig::default(), 8).await;
    let client = reqwest::Client::new();

    let health = server.get_json("/health").await;
    assert_eq!(health["status"], "healthy");
    assert_eq!(health["message"], "Guardian Validation API is running");
    assert_eq!(health["model"]["state"], "ready");
    assert_eq!(health["model"]["device"], "cpu");
    assert_eq!(health["model"]["weights"], "f32");
    assert!(health["model"].get("synthetic").is_none(), "{health}");

    // The original README's example: {"user_id": "user-123", "question": "HAIIII BODOH"}.
    let response = client
        .post(server.url("/validate"))
        .json(&json!({"user_id": "user-123", "question": "HAIIII BODOH"}))
        .send()
        .await
        .expect("validate");
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.expect("json");
    assert_eq!(
        keys(&body),
        set(&[
            "user_id",
            "question",
            "case",
            "execution_per_step",
            "status_guard",
            "ai_response",
            "scores"
        ])
    );
    assert_eq!(body["user_id"], "user-123");
    assert_eq!(body["question"], "HAIIII BODOH");
    let steps = body["execution_per_step"].as_array().expect("steps");
    let names: Vec<&str> = steps
        .iter()
        .map(|s| s["step"].as_str().expect("step"))
        .collect();
    assert_eq!(names, ["spam", "toxic", "harassment", "financial_advice"]);
    for step in steps {
        assert_eq!(keys(step), set(&["step", "status"]));
        assert!(["passed", "failed"].contains(&step["status"].as_str().expect("status")));
    }
    let failed: Vec<&str> = steps
        .iter()
        .filter(|s| s["status"] == "failed")
        .map(|s| s["step"].as_str().expect("step"))
        .collect();
    match body["status_guard"].as_str().expect("status") {
        "passed" => {
            assert_eq!(body["case"], "aman");
            assert_eq!(body["ai_response"], "");
        }
        "failed" => {
            assert_eq!(body["case"], failed.join(", "));
            assert!(!body["ai_response"].as_str().expect("message").is_empty());
        }
        other => panic!("status_guard {other}"),
    }
    assert_eq!(
        keys(&body["scores"]),
        set(&["spam", "toxic", "harassment", "financial_advice"])
    );

    let chat = server
        .post_json(
            "/chat",
            &json!({"user_id": "user-123", "question": "Bagaimana cara top up saldo?"}),
        )
        .await;
    assert_eq!(keys(&chat), set(&["response", "status", "can_proceed"]));
    assert_eq!(chat["can_proceed"], chat["status"] == "passed");
    assert_eq!(chat["response"] == "", chat["status"] == "passed");

    let recorded = server
        .store
        .list(
            &HistoryFilter {
                user_id: Some("user-123".into()),
                ..Default::default()
            },
            None,
            10,
        )
        .await
        .expect("history");
    assert_eq!(recorded.rows.len(), 2);
    assert!(recorded.rows.iter().all(|r| r.source == "http"));
}

#[tokio::test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
async fn moderations_speak_openais_shape() {
    let server = start(ServerConfig::default(), 8).await;
    let one = json!({"input": "Beli saham BBCA sekarang, pasti cuan!", "model": "omni-moderation-latest"});
    let one = server.post_json("/v1/moderations", &one).await;
    assert_eq!(keys(&one), set(&["id", "model", "results"]));
    assert!(one["id"].as_str().expect("id").starts_with("modr-"));
    let results = one["results"].as_array().expect("results");
    assert_eq!(results.len(), 1);
    assert_eq!(
        keys(&results[0]),
        set(&["flagged", "categories", "category_scores"])
    );
    assert_eq!(
        keys(&results[0]["categories"]),
        set(&["spam", "toxic", "harassment", "financial_advice"])
    );
    for (key, flagged) in results[0]["categories"].as_object().expect("categories") {
        let score = results[0]["category_scores"][key].as_f64().expect("score");
        assert!((0.0..=1.0).contains(&score));
        assert!(flagged.is_boolean());
    }

    let many = server
        .post_json(
            "/v1/moderations",
            &json!({"input": ["Selamat pagi, apa kabar?", "dasar goblok kamu anjing"]}),
        )
        .await;
    assert_eq!(
        many["results"].as_array().map(Vec::len),
        Some(2),
        "one result per input, in order"
    );

    let validators = server.get_json("/validators").await;
    let list = validators["validators"].as_array().expect("list");
    assert_eq!(list.len(), 4);
    assert_eq!(list[0]["key"], "spam");
    assert_eq!(list[0]["content_hash"].as_str().map(str::len), Some(64));
    assert!(
        list.iter().all(|v| v["scored_by"] == "head"),
        "the shipped heads score /validate: {list:?}"
    );

    let doc = server.get_json("/openapi.json").await;
    assert_eq!(doc["openapi"], "3.1.0");
    for path in [
        "/validate",
        "/chat",
        "/health",
        "/v1/moderations",
        "/validators",
        "/openapi.json",
    ] {
        assert!(doc["paths"][path].is_object(), "{path} undocumented");
    }
}

#[tokio::test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
async fn a_full_queue_answers_503_with_retry_after() {
    let server = start(ServerConfig::default(), 1).await;
    let client = reqwest::Client::new();
    let requests = (0..8).map(|i| {
        let client = client.clone();
        let url = server.url("/validate");
        async move {
            client
                .post(url)
                .json(&json!({"user_id": "load", "question": format!("pesan nomor {i}")}))
                .send()
                .await
                .expect("send")
        }
    });
    let responses = futures_join_all(requests).await;
    let ok = responses.iter().filter(|r| r.status() == 200).count();
    let busy: Vec<&reqwest::Response> = responses.iter().filter(|r| r.status() == 503).collect();
    assert!(ok >= 1, "some requests are served");
    assert!(
        !busy.is_empty(),
        "a queue of one cannot hold eight requests"
    );
    assert_eq!(ok + busy.len(), 8);
    for r in &busy {
        assert_eq!(r.headers()["retry-after"], "1");
    }
    let recorded = server
        .store
        .count(&HistoryFilter {
            user_id: Some("load".into()),
            ..Default::default()
        })
        .await
        .expect("count");
    assert_eq!(recorded as usize, ok, "exactly one verdict per 200");
}

async fn futures_join_all<F>(futures: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.expect("task"));
    }
    out
}

/// Concurrent requests are drained into shared batches (issue 6); each still gets exactly the
/// verdict it gets alone.
#[tokio::test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
async fn concurrent_requests_get_the_verdicts_they_get_alone() {
    let server = start(ServerConfig::default(), 64).await;
    let client = reqwest::Client::new();
    let messages = [
        "Selamat! Anda memenangkan hadiah 10 juta, klik link ini",
        "Bagaimana cara top up saldo?",
        "dasar goblok kamu",
        "Beli saham BBCA sekarang, pasti cuan!",
        "awas kamu ya, aku tahu rumahmu",
        "terima kasih banyak kak",
        "Promo gratis ongkir hari ini saja, follow akun kami",
        "What time does the store open tomorrow?",
    ];
    let ask = |question: &'static str| {
        let client = client.clone();
        let url = server.url("/validate");
        async move {
            client
                .post(url)
                .json(&json!({"user_id": "batch", "question": question}))
                .send()
                .await
                .expect("send")
                .json::<Value>()
                .await
                .expect("json")
        }
    };
    let together = futures_join_all(messages.iter().map(|m| ask(m))).await;
    for (message, batched) in messages.iter().zip(&together) {
        let mut alone = ask(message).await;
        let mut batched = batched.clone();
        // Scores agree to float rounding (summation order differs in a batch); the rest exactly.
        let (want, got) = (alone["scores"].take(), batched["scores"].take());
        for (key, want) in want.as_object().expect("scores") {
            let (want, got) = (
                want.as_f64().expect("score"),
                got[key].as_f64().expect("score"),
            );
            assert!(
                (want - got).abs() < 1e-3,
                "{message} {key}: {want} vs {got}"
            );
        }
        assert_eq!(alone, batched, "{message}");
    }
}
