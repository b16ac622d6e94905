//! Endpoints. Handlers are thin: parse, ask the worker, record, shape the answer.

use std::sync::Arc;

use aegis_guard::{
    ChatResponse, GuardError, GuardInput, ReceivedConversation, Role, TurnsChecked,
    ValidateResponse, Verdict,
};
use aegis_store::Source;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::Value;

use crate::error::{worker_error, ApiError};
use crate::json::ApiJson;
use crate::state::{AppState, ServerConfig};
use aegis_runtime::{answer_gate, check_and_record, Submitter};

/// Give `question` (one message) or `messages` (a conversation), not both.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GuardRequest {
    user_id: String,
    /// One message, a user's (the original service's field): not empty or only whitespace.
    #[serde(default, deserialize_with = "crate::json::not_null")]
    #[schema(value_type = String)]
    question: Option<String>,
    /// A conversation in the chat shape: its last turn is checked in the context of the turns
    /// before it (every turn with `"turns": "all"`); system turns are neither. Read as JSON so a
    /// refusal can name the turn at fault.
    #[serde(default, deserialize_with = "crate::json::not_null")]
    #[schema(value_type = Vec<ChatTurn>)]
    messages: Option<Vec<Value>>,
    /// With messages: check the last turn (the default) or every turn.
    #[serde(default)]
    turns: TurnsChecked,
    /// `/chat` only: when the last turn passes, write an answer with the loaded model, check it
    /// as the assistant's turn, and return it, or the rejection when it fails. The last user or
    /// assistant turn must be the user's, and only it is checked.
    #[serde(default)]
    answer: bool,
}

/// One turn of a conversation, as OpenAI's chat API writes it. Described here, parsed by
/// `aegis_guard::ReceivedConversation` (which names the turn at fault); the schemathesis run in the
/// suite holds the two together.
#[derive(Deserialize, utoipa::ToSchema)]
#[allow(dead_code)]
pub(crate) struct ChatTurn {
    role: ChatRole,
    content: TurnContent,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ChatRole {
    User,
    Assistant,
    /// Read by neither the guard nor the answer: instructions to a model, not a turn.
    System,
    Developer,
}

/// Text, or a list of text parts (joined with newlines); not empty or only whitespace.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub(crate) enum TurnContent {
    Text(String),
    Parts(Vec<TextPart>),
}

#[derive(Deserialize, utoipa::ToSchema)]
#[allow(dead_code)]
pub(crate) struct TextPart {
    r#type: TextPartKind,
    text: String,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum TextPartKind {
    Text,
}

impl GuardRequest {
    /// The turns to check, each named by its position in `messages`. Bad input is refused here,
    /// before the queue, by the turn at fault.
    fn inputs(&self, limits: &ServerConfig) -> Result<Vec<GuardInput>, ApiError> {
        // The description forbids the pair on both endpoints that share this body, so /validate,
        // which writes no answer, refuses it as /chat does rather than ignoring half of it.
        if self.answer && self.turns == TurnsChecked::All {
            return Err(answer_checks_the_last_turn_only());
        }
        let turns = match (&self.question, &self.messages) {
            (Some(question), None) => return Ok(vec![GuardInput::message(question.as_str())]),
            (None, Some(messages)) => messages,
            (None, None) => {
                // A missing field, as everywhere in the API.
                return Err(ApiError::new(
                    axum::http::StatusCode::UNPROCESSABLE_ENTITY,
                    "invalid_request",
                    "missing field `question`: give question (one message) or messages (a conversation)",
                ));
            }
            (Some(_), Some(_)) => {
                return Err(ApiError::bad_request(
                    "bad_request",
                    "give either question (one message) or messages (a conversation), not both",
                ))
            }
        };
        // Counted before any turn is read, so a huge conversation costs nothing.
        if turns.len() > limits.max_turns {
            return Err(too_many_turns(format!(
                "messages holds {} turns; this server takes at most {} per request \
                 (send the recent turns: older ones matter little to the last turn's verdict)",
                turns.len(),
                limits.max_turns
            )));
        }
        let conversation = ReceivedConversation::parse(turns).map_err(guard_input_error)?;
        if self.turns == TurnsChecked::All && conversation.turns().len() > limits.max_checked_turns
        {
            return Err(too_many_turns(format!(
                "\"turns\": \"all\" would check {} turns; this server checks at most {} per \
                 request (send the conversation in parts, each with the turns before it)",
                conversation.turns().len(),
                limits.max_checked_turns
            )));
        }
        let inputs = conversation.inputs(self.turns).map_err(guard_input_error)?;
        Ok(inputs)
    }

    /// What the original response's `question` field holds: the message, or the last turn.
    fn question(&self, inputs: &[GuardInput]) -> String {
        self.question.clone().unwrap_or_else(|| {
            inputs
                .last()
                .map(|i| i.text().to_string())
                .unwrap_or_default()
        })
    }
}

fn answer_checks_the_last_turn_only() -> ApiError {
    ApiError::bad_request(
        "bad_request",
        "answer needs a conversation that ends with the user's turn, and checks that turn only",
    )
}

pub(crate) fn too_many_turns(message: String) -> ApiError {
    ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "too_many_turns", message)
}

pub(crate) fn guard_input_error(error: GuardError) -> ApiError {
    ApiError::bad_request("bad_turn", error.to_string())
}

/// Checks and records one turn.
pub(crate) async fn check(
    state: &AppState,
    input: GuardInput,
    user_id: Option<&str>,
) -> Result<Verdict, ApiError> {
    let checked = check_unmeasured(state, input, user_id).await;
    match &checked {
        Ok(verdict) => crate::metrics::record_verdict(verdict),
        Err(error) => crate::metrics::record_check_failure(error),
    }
    checked
}

/// Checks the request's turns, all queued at once so the worker batches them; answers keep
/// their order.
pub(crate) async fn check_all(
    state: &AppState,
    inputs: Vec<GuardInput>,
    user_id: Option<&str>,
) -> Result<Vec<Verdict>, ApiError> {
    futures_util::future::try_join_all(inputs.into_iter().map(|i| check(state, i, user_id))).await
}

async fn check_unmeasured(
    state: &AppState,
    input: GuardInput,
    user_id: Option<&str>,
) -> Result<Verdict, ApiError> {
    let Some(store) = &state.store else {
        let checked = state.worker.check(input).await;
        return Ok(checked.map_err(worker_error)?.verdict);
    };
    let submitter = Submitter {
        source: Source::Http,
        user_id,
    };
    let recorded = check_and_record(&state.worker, store, input, submitter)
        .await
        .map_err(worker_error)?;
    // The client gets its verdict even when history could not keep it.
    if let Err(e) = recorded.verdict_id {
        tracing::error!(error = %e, "recording the verdict failed");
    }
    Ok(recorded.checked.verdict)
}

/// Check a message, or a conversation's turns: the original service's response shape plus
/// per-validator scores.
#[utoipa::path(post, path = "/validate", request_body = GuardRequest,
    responses((status = 200, description = "The verdict", body = ValidateResponse)))]
pub(crate) async fn validate(
    State(state): State<Arc<AppState>>,
    ApiJson(request): ApiJson<GuardRequest>,
) -> Result<Json<ValidateResponse>, ApiError> {
    let inputs = request.inputs(&state.config)?;
    let question = request.question(&inputs);
    let verdicts = check_all(&state, inputs, Some(&request.user_id)).await?;
    Ok(Json(if request.messages.is_some() {
        ValidateResponse::for_turns(&request.user_id, &question, &verdicts)
    } else {
        ValidateResponse::new(&request.user_id, &question, &verdicts[0])
    }))
}

/// Check a message and say whether the conversation can proceed; with `"answer": true`, also
/// write the model's answer and check it.
#[utoipa::path(post, path = "/chat", request_body = GuardRequest,
    responses((status = 200, description = "Whether the conversation can proceed", body = ChatResponse)))]
pub(crate) async fn chat(
    State(state): State<Arc<AppState>>,
    ApiJson(request): ApiJson<GuardRequest>,
) -> Result<Json<ChatResponse>, ApiError> {
    let inputs = request.inputs(&state.config)?;
    if request.answer {
        return answer(&state, &request, inputs).await.map(Json);
    }
    let verdicts = check_all(&state, inputs, Some(&request.user_id)).await?;
    Ok(Json(ChatResponse::for_turns(&verdicts)))
}

/// `/chat` with `"answer": true`: the answer gate (see `aegis_runtime::answer_gate`).
async fn answer(
    state: &AppState,
    request: &GuardRequest,
    inputs: Vec<GuardInput>,
) -> Result<ChatResponse, ApiError> {
    let Some(last) = inputs.into_iter().last() else {
        return Err(guard_input_error(GuardError::EmptyText));
    };
    if last.turn.role != Role::User {
        return Err(answer_checks_the_last_turn_only());
    }
    let mut turns = last.context.to_vec();
    turns.push(last.turn);
    let submitter = Submitter {
        source: Source::Http,
        user_id: Some(&request.user_id),
    };
    let gated = answer_gate(
        &state.worker,
        state.store.as_deref(),
        submitter,
        turns,
        state.config.answer_tokens,
    )
    .await
    .map_err(worker_error)?;
    crate::metrics::record_verdict(&gated.question);
    let mut response = ChatResponse::new(&gated.question);
    if let Some((_, verdict)) = &gated.answer {
        crate::metrics::record_verdict(verdict);
        response.answer_status = Some(verdict.status.as_str().to_string());
    }
    response.response = gated.response().to_string();
    response.can_proceed = gated.can_proceed();
    response.status = if gated.can_proceed() {
        "passed"
    } else {
        "failed"
    }
    .to_string();
    Ok(response)
}
