//! `/metrics`: Prometheus text whose counters move with the requests served, behind the token
//! when one is set. The recorder is process-wide, so tests compare counts before and after.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::json;
use tower::ServiceExt;

use aegis_server::ServerConfig;

use crate::fake::{fake_router, post, send};

async fn scrape(router: &axum::Router, token: Option<&str>) -> (StatusCode, String) {
    let mut request = Request::get("/metrics");
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let response = router
        .clone()
        .oneshot(request.body(Body::empty()).expect("request"))
        .await
        .expect("infallible");
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body");
    (status, String::from_utf8(bytes.to_vec()).expect("UTF-8"))
}

/// Every sample line of the exposition format, as (series with its labels, value); panics on a
/// line that is neither a sample nor a `# TYPE` / `# HELP` comment.
fn samples(text: &str) -> Vec<(String, f64)> {
    let valid_name = |name: &str| {
        !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
            && !name.starts_with(|c: char| c.is_ascii_digit())
    };
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .filter_map(|line| {
            if let Some(comment) = line.strip_prefix("# ") {
                let mut words = comment.split_whitespace();
                let kind = words.next();
                assert!(matches!(kind, Some("TYPE" | "HELP")), "{line}");
                assert!(words.next().is_some_and(valid_name), "{line}");
                return None;
            }
            let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
            let name = series.split('{').next().expect("name");
            assert!(valid_name(name), "{line}");
            if let Some(labels) = series.strip_prefix(name) {
                assert!(
                    labels.is_empty() || (labels.starts_with('{') && labels.ends_with('}')),
                    "{line}"
                );
            }
            let value = match value {
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                v => v.parse().unwrap_or_else(|_| panic!("not a number: {line}")),
            };
            Some((series.to_string(), value))
        })
        .collect()
}

/// The sum of the samples of `name` whose labels include every one of `labels`.
fn total(samples: &[(String, f64)], name: &str, labels: &[&str]) -> f64 {
    samples
        .iter()
        .filter(|(series, _)| {
            series.split('{').next() == Some(name) && labels.iter().all(|l| series.contains(l))
        })
        .map(|(_, value)| value)
        .sum()
}

#[tokio::test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
async fn metrics_parse_as_prometheus_text_and_move_with_requests() {
    let router = fake_router(ServerConfig::default()).await;
    let (status, before) = scrape(&router, None).await;
    assert_eq!(status, StatusCode::OK);
    let before = samples(&before);

    let ok = json!({"user_id": "u1", "question": "makasih kak"}).to_string();
    let (status, _) = send(&router, post("/validate", "application/json", ok)).await;
    assert_eq!(status, StatusCode::OK);
    let empty = json!({"user_id": "u1", "question": "  "}).to_string();
    let (status, _) = send(&router, post("/validate", "application/json", empty)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    let (_, after) = scrape(&router, None).await;
    let after = samples(&after);
    let moved =
        |name: &str, labels: &[&str]| total(&after, name, labels) - total(&before, name, labels);
    let validate_ok = [r#"endpoint="/validate""#, r#"status="200""#];
    assert!(moved("aegis_http_requests_total", &validate_ok) >= 1.0);
    let validate_bad = [r#"endpoint="/validate""#, r#"status="400""#];
    assert!(moved("aegis_http_requests_total", &validate_bad) >= 1.0);
    assert!(moved("aegis_verdict_latency_seconds_count", &[]) >= 1.0);
    for validator in ["spam", "toxic", "harassment", "financial_advice"] {
        let label = format!(r#"validator="{validator}""#);
        assert!(
            moved("aegis_validator_verdicts_total", &[&label]) >= 1.0,
            "{validator}"
        );
    }
    assert!(moved("aegis_check_failures_total", &[r#"reason="empty_text""#]) >= 1.0);
    assert_eq!(
        total(&after, "aegis_model_state", &[r#"state="ready""#]),
        1.0
    );
    assert!(after.iter().any(|(s, _)| s == "aegis_queue_depth"));
    assert!(after
        .iter()
        .any(|(s, _)| s.starts_with("aegis_model_info{")));
}

#[tokio::test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
async fn metrics_need_the_token_when_one_is_set() {
    let router = fake_router(ServerConfig {
        token: Some("s3cret".into()),
        ..ServerConfig::default()
    })
    .await;
    assert_eq!(scrape(&router, None).await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(
        scrape(&router, Some("wrong")).await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(scrape(&router, Some("s3cret")).await.0, StatusCode::OK);
}
