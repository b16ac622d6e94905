//! The Playground: a prompt author talks to the chat upstream (Settings → HTTP) through the
//! guard and watches each check of the streaming answer as it happens (scores as the answer grows,
//! where it is or would be cut), to tune thresholds on live answers. The same relay as the HTTP
//! API's `/v1/chat/completions` (`aegis_runtime::guard_stream`); both turns go to history.

pub(crate) mod step;

use std::time::Duration;

use aegis_guard::{GuardInput, Role, Status, Turn, TurnsChecked, Verdict};
use aegis_runtime::{check_and_record, guard_stream, Step, StreamCheck, StreamContext, Submitter};
use aegis_store::Source;
use aegis_upstream::{Release, StreamPolicy};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::console::{check_size, Console, ConsoleEvent};
use crate::error::ConsoleError;
pub use step::{PlaygroundCheck, PlaygroundScore, PlaygroundStep};

/// How long a Playground answer may stream.
const ANSWER_LIMIT: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct PlaygroundRequest {
    /// The conversation; its last turn is the user's.
    pub turns: Vec<Turn>,
    /// Send each part of the answer as it comes (and cut on a failure), instead of only once a
    /// check passed it.
    pub immediate: bool,
    /// Upstream chunks between checks when no sentence ends.
    pub check_every: usize,
    /// The upstream's model name; empty for its default.
    pub model: String,
}

impl PlaygroundCheck {
    fn of(verdict: &Verdict, offset: usize, checked_chars: usize) -> Self {
        Self {
            passed: verdict.status == Status::Passed,
            offset,
            checked_chars,
            scores: verdict
                .results
                .iter()
                .map(|r| PlaygroundScore {
                    key: r.key.clone(),
                    score: r.score,
                    threshold: r.threshold,
                })
                .collect(),
            failed: verdict
                .results
                .iter()
                .find(|r| !r.passed)
                .map(|r| r.key.clone()),
        }
    }

    fn of_stream(check: &StreamCheck) -> Self {
        Self::of(&check.verdict, check.offset, check.checked_chars)
    }
}

impl Console {
    /// Sends `request` through the guard to the chat upstream and returns when the answer has
    /// ended; each step goes out as a `Playground` event as it happens.
    pub async fn playground_send(
        &self,
        playground_id: String,
        request: PlaygroundRequest,
    ) -> Result<(), ConsoleError> {
        let upstream = self.settings().http.upstream()?.ok_or_else(|| {
            ConsoleError::Invalid(
                "no chat upstream is set: give one in Settings → HTTP endpoint (an OpenAI-compatible server's URL)"
                    .into(),
            )
        })?;
        if request.turns.last().is_none_or(|t| t.role != Role::User) {
            return Err(ConsoleError::Invalid(
                "the conversation must end with your turn".into(),
            ));
        }
        for turn in &request.turns {
            check_size(&turn.content)?;
        }
        let mut inputs = GuardInput::from_conversation(&request.turns, TurnsChecked::Last)?;
        let question = inputs
            .pop()
            .ok_or_else(|| ConsoleError::Invalid("the conversation has no turn to check".into()))?;
        let emit = |step: PlaygroundStep| {
            self.events.emit(ConsoleEvent::Playground {
                playground_id: playground_id.clone(),
                step,
            })
        };
        let worker = self.worker()?;
        let submitter = Submitter {
            source: Source::Typed,
            user_id: None,
        };
        let asked = check_and_record(&worker, self.store(), question, submitter).await?;
        let verdict = asked.checked.verdict;
        let chars = request
            .turns
            .last()
            .map_or(0, |t| t.content.chars().count());
        emit(PlaygroundStep::Question {
            check: PlaygroundCheck::of(&verdict, 0, chars),
            rejection: verdict.rejection_message.clone(),
        });
        if verdict.status == Status::Failed {
            emit(PlaygroundStep::Finished {
                reason: "content_filter".into(),
            });
            return Ok(());
        }
        let messages: Vec<Value> = request
            .turns
            .iter()
            .map(|t| json!({"role": t.role.as_str(), "content": t.content}))
            .collect();
        let mut body = json!({"messages": messages});
        if !request.model.trim().is_empty() {
            body["model"] = json!(request.model.trim());
        }
        let deltas = match upstream.stream(&body).await {
            Ok(deltas) => deltas,
            Err(e) => {
                let message = e.to_string();
                emit(PlaygroundStep::Failed {
                    message: message.clone(),
                });
                return Err(ConsoleError::Invalid(message));
            }
        };
        let policy = StreamPolicy {
            release: if request.immediate {
                Release::Immediate
            } else {
                Release::Checked
            },
            check_every: request.check_every.max(1),
        };
        let context = StreamContext {
            store: Some(self.store().clone()),
            source: Source::Typed,
            user_id: None,
            limit: ANSWER_LIMIT,
        };
        let mut steps = guard_stream(worker, request.turns, deltas, policy, context);
        while let Some(step) = steps.recv().await {
            match step {
                Step::Named { .. } | Step::Upstream(_) => {}
                Step::Text { text, check } => emit(PlaygroundStep::Text {
                    text,
                    check: check.as_ref().map(PlaygroundCheck::of_stream),
                }),
                Step::Cut { check, .. } => {
                    emit(PlaygroundStep::Cut {
                        check: PlaygroundCheck::of_stream(&check),
                        rejection: check.verdict.rejection_message.clone(),
                    });
                    emit(PlaygroundStep::Finished {
                        reason: "content_filter".into(),
                    });
                }
                Step::Finished(finish) => emit(PlaygroundStep::Finished {
                    reason: finish
                        .as_ref()
                        .and_then(|f| f.pointer("/choices/0/finish_reason"))
                        .and_then(Value::as_str)
                        .unwrap_or("stop")
                        .to_string(),
                }),
                Step::Failed(message) => emit(PlaygroundStep::Failed { message }),
            }
        }
        Ok(())
    }
}
