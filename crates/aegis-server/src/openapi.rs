//! The API's OpenAPI 3.1 description, served at `/openapi.json`: generated from the request and
//! response types and the handlers' annotations (utoipa), so it cannot drift from them.
//!
//! Two things types cannot say are added here, next to each other: the errors every endpoint
//! shares (they come from middleware, not from a handler's signature), and the rules that join
//! fields (`question` or `messages`, not both; at least one user or assistant turn; a
//! non-blank text), with the limits this server was started with and the validators it loaded.
//! The schemathesis run in the suite holds the description to what the server does.

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};
use utoipa::OpenApi;

use crate::error::ErrorBody;
use crate::moderation::MAX_MODERATION_INPUTS;
use crate::state::AppState;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "AEGIS guard API",
        description = "Checks messages against spam, toxic, harassment and financial-advice policies with a local Gemma 3. Compatible with the original AEGIS Shield service and with OpenAI's moderation API."
    ),
    paths(
        crate::routes::validate,
        crate::routes::chat,
        crate::moderation::moderations,
        crate::status::health,
        crate::status::validators,
        crate::feedback::feedback,
        crate::metrics::metrics,
        openapi,
    ),
    components(schemas(ErrorBody))
)]
struct ApiDoc;

/// Described only where it is served: with an upstream.
#[derive(OpenApi)]
#[openapi(paths(crate::completions::chat_completions))]
struct UpstreamDoc;

/// Rust's whitespace (what `str::trim` removes), as a JSON Schema pattern: a text must hold one
/// character outside it. Spelled out because regex engines disagree about `\s`.
const NOT_BLANK: &str = "[^\\t\\n\\u000b\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]";

/// The description of this server: its limits and the validators it has loaded.
pub fn document(state: &AppState) -> Value {
    let validators: Option<Vec<String>> = state
        .worker
        .guard()
        .map(|guard| guard.validators().iter().map(|v| v.key.clone()).collect());
    let limits = Limits {
        upstream: state.config.upstream.is_some(),
        max_turns: state.config.max_turns,
        max_checked_turns: state.config.max_checked_turns,
        validators,
    };
    let (document, missing) = described(&limits);
    if !missing.is_empty() {
        tracing::warn!(?missing, "the API description lost a constraint");
    }
    document
}

struct Limits {
    upstream: bool,
    max_turns: usize,
    max_checked_turns: usize,
    /// The loaded validators' keys; `None` while the model loads.
    validators: Option<Vec<String>>,
}

/// The document, and the places a constraint was meant for but no field is (a renamed field):
/// the tests keep that list empty.
fn described(limits: &Limits) -> (Value, Vec<String>) {
    let mut api = ApiDoc::openapi();
    if limits.upstream {
        api.merge(UpstreamDoc::openapi());
    }
    let mut document = serde_json::to_value(api).unwrap_or(Value::Null);
    add_shared_errors(&mut document);
    let mut missing = Vec::new();
    for (pointer, constraint) in constraints(limits) {
        match document
            .pointer_mut(&pointer)
            .and_then(Value::as_object_mut)
        {
            Some(schema) => {
                if let Value::Object(constraint) = constraint {
                    schema.extend(constraint);
                }
            }
            None => missing.push(pointer),
        }
    }
    (document, missing)
}

/// The errors middleware and extractors answer, by the operations they can reach.
fn add_shared_errors(document: &mut Value) {
    let Some(paths) = document.get_mut("paths").and_then(Value::as_object_mut) else {
        return;
    };
    for (path, item) in paths.iter_mut() {
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        for (method, operation) in item.iter_mut() {
            let mut codes = vec![
                ("403", "The Host is a name this server does not answer for, or the browser page's Origin is not allowed (host_not_allowed, origin_not_allowed)"),
                ("503", "Busy (busy: the queue is full), the model is loading or failed, or the request ran past the time limit (timed_out); see Retry-After"),
            ];
            if path != "/health" {
                codes.push((
                    "401",
                    "A token is set and this request did not send it (Authorization: Bearer)",
                ));
            }
            if method == "post" {
                codes.extend([
                    ("400", "Malformed JSON, or a request the fields allow but the server cannot do (bad_request, bad_turn, empty_text)"),
                    ("413", "Body over the size limit (body_too_large), a text over the model's context in tokens (text_too_long), or too many turns (too_many_turns)"),
                    ("415", "The body was not sent as application/json"),
                    ("422", "A field is missing, has the wrong type, or names what is not there (invalid_request, unknown_validator, unknown_language)"),
                    ("500", "The model failed on this request (internal_error, guard_failed); the next request is served"),
                ]);
            }
            let Some(responses) = operation
                .get_mut("responses")
                .and_then(Value::as_object_mut)
            else {
                continue;
            };
            for (code, description) in codes {
                responses
                    .entry(code)
                    .or_insert_with(|| error_response(description));
            }
        }
    }
}

fn error_response(description: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
    })
}

/// The rules that join fields, and this server's limits, by the schema they belong to.
fn constraints(limits: &Limits) -> Vec<(String, Value)> {
    let schema = |name: &str| format!("/components/schemas/{name}");
    let field = |name: &str, field: &str| format!("/components/schemas/{name}/properties/{field}");
    let text = json!({"type": "string", "minLength": 1, "pattern": NOT_BLANK});
    let mut rules = vec![
        (
            schema("GuardRequest"),
            json!({
                "oneOf": [{"required": ["question"]}, {"required": ["messages"]}],
                "allOf": [
                    // "turns": "all" checks each turn: a tighter bound than the turns carried.
                    {
                        "if": {"required": ["turns"], "properties": {"turns": {"const": "all"}}},
                        "then": {"properties": {"messages": {"maxItems": limits.max_checked_turns}}},
                    },
                    // An answer follows the last turn, which is the one checked.
                    {
                        "if": {"required": ["answer"], "properties": {"answer": {"const": true}}},
                        "then": {"not": {"required": ["turns"], "properties": {"turns": {"const": "all"}}}},
                    },
                ],
            }),
        ),
        (field("GuardRequest", "question"), text.clone()),
        (
            field("GuardRequest", "messages"),
            json!({
                "minItems": 1,
                "maxItems": limits.max_turns,
                "contains": {"properties": {"role": {"enum": ["user", "assistant"]}}},
            }),
        ),
        (format!("{}/oneOf/0", schema("TurnContent")), text.clone()),
        (
            format!("{}/oneOf/1", schema("TurnContent")),
            json!({"contains": {"properties": {"text": {"pattern": NOT_BLANK}}}}),
        ),
        (
            format!("{}/oneOf/0", schema("ModerationInput")),
            text.clone(),
        ),
        (
            format!("{}/oneOf/1", schema("ModerationInput")),
            json!({"minItems": 1, "maxItems": MAX_MODERATION_INPUTS, "items": text.clone()}),
        ),
        (
            schema("FeedbackRequest"),
            json!({"oneOf": [{"required": ["verdict_id"]}, {"required": ["text"]}]}),
        ),
        (field("FeedbackRequest", "text"), text),
    ];
    if let Some(keys) = &limits.validators {
        rules.push((field("FeedbackRequest", "validator"), json!({"enum": keys})));
    }
    rules
}

/// Every path the router serves, for the tests: each must be described.
#[cfg(test)]
const ROUTED: [&str; 8] = [
    "/validate",
    "/chat",
    "/v1/moderations",
    "/health",
    "/validators",
    "/feedback",
    "/metrics",
    "/openapi.json",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn document() -> Value {
        let (document, missing) = described(&Limits {
            upstream: false,
            max_turns: 256,
            max_checked_turns: 32,
            validators: Some(vec!["spam".into(), "toxic".into()]),
        });
        assert!(
            missing.is_empty(),
            "constraints without a field: {missing:?}"
        );
        document
    }

    #[test]
    fn every_route_is_described_with_the_errors_it_can_answer() {
        let document = document();
        assert_eq!(document["openapi"], "3.1.0");
        for path in ROUTED {
            let item = document["paths"][path].as_object();
            let item = item.unwrap_or_else(|| panic!("{path} undocumented"));
            for (method, operation) in item {
                let responses = &operation["responses"];
                assert!(responses["403"].is_object(), "{method} {path}: 403");
                if method == "post" {
                    for code in ["400", "413", "415", "422", "500", "503"] {
                        assert!(responses[code].is_object(), "{method} {path}: {code}");
                    }
                }
            }
        }
        assert!(document["paths"]["/health"]["get"]["responses"]["401"].is_null());
        assert!(document["paths"]["/feedback"]["post"]["responses"]["429"].is_object());
    }

    #[test]
    fn the_request_schemas_say_what_the_server_refuses() {
        let document = document();
        let guard = &document["components"]["schemas"]["GuardRequest"];
        assert_eq!(
            guard["additionalProperties"], false,
            "unknown fields are refused"
        );
        assert_eq!(
            guard["oneOf"],
            json!([{"required": ["question"]}, {"required": ["messages"]}])
        );
        assert_eq!(
            guard["properties"]["question"]["type"], "string",
            "not nullable"
        );
        assert_eq!(guard["properties"]["messages"]["maxItems"], 256);
        assert_eq!(
            guard["allOf"][0]["then"]["properties"]["messages"]["maxItems"], 32,
            "turns: all is bounded tighter"
        );
        let feedback = &document["components"]["schemas"]["FeedbackRequest"];
        assert_eq!(
            feedback["properties"]["validator"]["enum"],
            json!(["spam", "toxic"])
        );
        assert!(document["components"]["schemas"]["ChatTurn"].is_object());
    }

    #[test]
    fn the_blank_pattern_is_rusts_whitespace() {
        // Every character `trim` removes is listed, and nothing else in the Latin-1 range.
        let listed = |c: char| {
            let escaped = format!("\\u{:04x}", c as u32);
            NOT_BLANK.contains(&escaped)
                || matches!(c, '\t' | '\n' | '\u{0c}' | '\r' | ' ')
                || ('\u{2000}'..='\u{200a}').contains(&c)
        };
        for c in (0..=0x3000u32).filter_map(char::from_u32) {
            assert_eq!(c.is_whitespace(), listed(c), "{c:?}");
        }
    }
}

/// This document.
#[utoipa::path(get, path = "/openapi.json",
    responses((status = 200, description = "This OpenAPI 3.1 document", body = Object)))]
pub(crate) async fn openapi(State(state): State<Arc<AppState>>) -> Json<Value> {
    Json(document(&state))
}
