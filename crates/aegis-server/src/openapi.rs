//! The API's OpenAPI 3.0 description, served at `/openapi.json`.

use serde_json::{json, Value};

fn error_responses(codes: &[&str]) -> serde_json::Map<String, Value> {
    let describe = |code: &str| {
        match code {
        "400" => "Malformed JSON or empty text",
        "401" => "Missing or wrong bearer token",
        "403" => "The Host is a name this server does not answer for, or the browser page's Origin is not allowed",
        "413" => "Body over the size limit, text over the model's context, or too many turns (too_many_turns)",
        "415" => "Body not sent as application/json",
        "422" => "A field is missing or has the wrong type",
        "503" => "Busy (queue full), the model is loading, or the request ran past the time limit (timed_out); see Retry-After",
        _ => "Error",
    }
    };
    codes
        .iter()
        .map(|code| {
            (
                code.to_string(),
                json!({
                    "description": describe(code),
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
                }),
            )
        })
        .collect()
}

fn post_json(summary: &str, request: &str, response: &str) -> Value {
    let mut responses = error_responses(&["400", "401", "403", "413", "415", "422", "503"]);
    responses.insert(
        "200".into(),
        json!({
            "description": "The verdict",
            "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{response}")}}}
        }),
    );
    json!({
        "post": {
            "summary": summary,
            "requestBody": {
                "required": true,
                "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{request}")}}}
            },
            "responses": responses,
        }
    })
}

pub fn document() -> Value {
    let mut validators_responses = error_responses(&["401", "503"]);
    validators_responses.insert(
        "200".into(),
        json!({"description": "The loaded validators", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Validators"}}}}),
    );
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "AEGIS guard API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Checks messages against spam, toxic, harassment and financial-advice policies with a local Gemma 3. Compatible with the original AEGIS Shield service and with OpenAI's moderation API."
        },
        "paths": {
            "/validate": post_json("Check a message; the original service's response shape plus per-validator scores", "GuardRequest", "ValidateResponse"),
            "/chat": post_json("Check a message; say whether the conversation can proceed", "GuardRequest", "ChatResponse"),
            "/v1/moderations": post_json("OpenAI-compatible moderation: one result per input, our validators as categories", "ModerationRequest", "ModerationResponse"),
            "/health": {"get": {"summary": "Liveness and model state", "responses": {
                "200": {"description": "Running", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Health"}}}}
            }}},
            "/validators": {"get": {"summary": "The loaded validators", "responses": validators_responses}},
            "/feedback": {"post": {
                "summary": "Report a verdict the guard got wrong: it becomes a proposed example, trained on once a reviewer accepts it (the Teach view, aegis examples accept)",
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/FeedbackRequest"}}}},
                "responses": {
                    "201": {"description": "A new example", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/FeedbackResponse"}}}},
                    "200": {"description": "The same text and label were there: counted again", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/FeedbackResponse"}}}},
                    "400": {"description": "Malformed JSON", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
                    "401": {"description": "Missing or wrong bearer token", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
                    "403": {"description": "Host or Origin not allowed", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
                    "429": {"description": "The validator already holds the most proposals a reviewer has not accepted (too_many_pending)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
                    "404": {"description": "No such verdict in history", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
                    "422": {"description": "Unknown validator or language, empty or oversized text, or both or neither of verdict_id and text", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
                    "503": {"description": "The model is loading, or the server keeps no history", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
                }
            }},
            "/metrics": {"get": {"summary": "Prometheus metrics: requests, verdict latency, verdicts per validator, failures, queue, model state", "responses": {"200": {"description": "Prometheus text exposition format", "content": {"text/plain": {"schema": {"type": "string"}}}}, "401": {"description": "A token is set and was not sent"}}}},
            "/openapi.json": {"get": {"summary": "This document", "responses": {
                "200": {"description": "OpenAPI 3.0 document", "content": {"application/json": {"schema": {"type": "object"}}}},
                "401": {"description": "Missing or wrong bearer token", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
            }}}
        },
        "components": {
            "schemas": {
                "FeedbackRequest": {
                    "type": "object",
                    "required": ["validator", "violates"],
                    "additionalProperties": false,
                    "properties": {
                        "validator": {"type": "string", "description": "The validator whose answer was wrong (GET /validators lists them)"},
                        "violates": {"type": "boolean", "description": "The correct answer: true when the text violates the policy"},
                        "verdict_id": {"type": "integer", "description": "A recorded verdict; give this or text"},
                        "text": {"type": "string", "description": "The message; give this or verdict_id"},
                        "lang": {"type": "string", "enum": ["id", "en"], "description": "id or en; detected when left out"}
                    }
                },
                "FeedbackResponse": {
                    "type": "object",
                    "required": ["example_id", "validator", "violates", "merged", "pending"],
                    "properties": {
                        "example_id": {"type": "integer"},
                        "validator": {"type": "string"},
                        "violates": {"type": "boolean"},
                        "merged": {"type": "boolean"},
                        "pending": {"type": "boolean", "description": "Always true: not trained on until a reviewer accepts it"}
                    }
                },
                "GuardRequest": {
                    "type": "object",
                    "required": ["user_id"],
                    "additionalProperties": false,
                    "description": "Give question (one message) or messages (a conversation), not both",
                    "properties": {
                        "user_id": {"type": "string"},
                        "question": {"type": "string", "minLength": 1, "pattern": "\\S", "description": "The message to check: not empty or only whitespace"},
                        "messages": {"type": "array", "minItems": 1, "description": "A conversation in the chat shape: the last turn is checked in the context of the turns before it (system turns are neither)", "items": {
                            "type": "object", "required": ["role", "content"],
                            "properties": {
                                "role": {"type": "string", "enum": ["user", "assistant", "system", "developer"]},
                                "content": {"oneOf": [
                                    {"type": "string", "minLength": 1, "pattern": "\\S"},
                                    {"type": "array", "items": {"type": "object", "required": ["type", "text"], "properties": {"type": {"type": "string", "enum": ["text"]}, "text": {"type": "string"}}}}
                                ]}
                            }
                        }},
                        "turns": {"type": "string", "enum": ["last", "all"], "description": "With messages: check the last turn (default) or every turn"},
                        "answer": {"type": "boolean", "description": "/chat only: when the last (user's) turn passes, write an answer with the loaded model, check it as the assistant's turn, and return it, or the rejection when it fails"}
                    }
                },
                "ValidateResponse": {
                    "type": "object",
                    "required": ["user_id", "question", "case", "execution_per_step", "status_guard", "ai_response", "scores"],
                    "properties": {
                        "user_id": {"type": "string"},
                        "question": {"type": "string"},
                        "case": {"type": "string", "description": "\"aman\" when every validator passed, else the failed validators joined by \", \""},
                        "execution_per_step": {"type": "array", "items": {
                            "type": "object", "required": ["step", "status"],
                            "properties": {"step": {"type": "string"}, "status": {"type": "string", "enum": ["passed", "failed", "skipped"]},
                                           "turn": {"type": "integer", "description": "messages requests: the position of the turn checked"}}
                        }},
                        "turns": {"type": "array", "description": "messages requests: each checked turn's verdict", "items": {
                            "type": "object",
                            "required": ["index", "role", "status", "case", "context_turns", "context_cut", "caught_in_context", "read_as_mention"],
                            "properties": {
                                "index": {"type": "integer"}, "role": {"type": "string", "enum": ["user", "assistant"]},
                                "status": {"type": "string", "enum": ["passed", "failed"]}, "case": {"type": "string"},
                                "context_turns": {"type": "integer", "description": "Earlier turns read with it"},
                                "context_cut": {"type": "integer", "description": "Older turns cut to fit the context budget"},
                                "caught_in_context": {"type": "array", "items": {"type": "string"}, "description": "Validators it failed only because of its context"},
                                "read_as_mention": {"type": "array", "items": {"type": "string"}, "description": "Validators it passed only because a quoted passage in the user's question or report was read as mentioned, not said"}
                            }
                        }},
                        "status_guard": {"type": "string", "enum": ["passed", "failed"]},
                        "ai_response": {"type": "string", "description": "Rejection message; empty when passed"},
                        "scores": {"type": "object", "additionalProperties": {"type": "number"}, "description": "Addition: P(violation) per validator"}
                    }
                },
                "ChatResponse": {
                    "type": "object",
                    "required": ["response", "status", "can_proceed"],
                    "properties": {
                        "response": {"type": "string"},
                        "status": {"type": "string", "enum": ["passed", "failed"]},
                        "can_proceed": {"type": "boolean"},
                        "answer_status": {"type": "string", "enum": ["passed", "failed"], "description": "answer requests: the verdict on the answer the model wrote"}
                    }
                },
                "ModerationRequest": {
                    "type": "object",
                    "required": ["input"],
                    "properties": {
                        "input": {"oneOf": [
                            {"type": "string", "minLength": 1, "pattern": "\\S"},
                            {"type": "array", "items": {"type": "string", "minLength": 1, "pattern": "\\S"}, "minItems": 1, "maxItems": 32}
                        ]},
                        "model": {"type": "string", "nullable": true, "description": "Accepted for compatibility; the loaded model answers"}
                    }
                },
                "ModerationResponse": {
                    "type": "object",
                    "required": ["id", "model", "results"],
                    "properties": {
                        "id": {"type": "string"},
                        "model": {"type": "string"},
                        "results": {"type": "array", "items": {
                            "type": "object",
                            "required": ["flagged", "categories", "category_scores"],
                            "properties": {
                                "flagged": {"type": "boolean"},
                                "categories": {"type": "object", "additionalProperties": {"type": "boolean"}},
                                "category_scores": {"type": "object", "additionalProperties": {"type": "number"}}
                            }
                        }}
                    }
                },
                "Health": {
                    "type": "object",
                    "required": ["status", "message", "model"],
                    "properties": {
                        "status": {"type": "string"},
                        "message": {"type": "string"},
                        "model": {"type": "object", "required": ["state"], "properties": {
                            "state": {"type": "string", "enum": ["loading", "ready", "failed"]},
                            "id": {"type": "string"},
                            "device": {"type": "string", "description": "cpu or cuda:N"},
                            "weights": {"type": "string", "enum": ["f32", "bf16", "quantized"]},
                            "synthetic": {"type": "boolean", "description": "random weights for speed tests: verdicts mean nothing"},
                            "warning": {"type": "string"},
                            "error": {"type": "string"}
                        }}
                    }
                },
                "Validators": {
                    "type": "object",
                    "required": ["validators"],
                    "properties": {"validators": {"type": "array", "items": {
                        "type": "object",
                        "required": ["key", "name", "threshold", "content_hash", "scored_by"],
                        "properties": {
                            "key": {"type": "string"}, "name": {"type": "string"}, "description": {"type": "string"},
                            "threshold": {"type": "number"}, "content_hash": {"type": "string"},
                            "scored_by": {"type": "string", "enum": ["head", "prompt"]}
                        }
                    }}}
                },
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {"error": {"type": "object", "required": ["code", "message"], "properties": {
                        "code": {"type": "string"}, "message": {"type": "string"}
                    }}}
                }
            }
        }
    })
}
