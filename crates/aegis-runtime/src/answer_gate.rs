//! The answer gate a prototype puts around its chatbot: check the user's turn, write an answer
//! with the loaded model, check the answer in the conversation, and give the rejection instead of
//! an answer that fails.

use aegis_guard::{GuardInput, Status, Turn, Verdict};

use aegis_store::Store;

use crate::record::{check_and_record, Submitter};
use crate::worker::{Worker, WorkerError};

/// An answer's length by default: a chat reply, not an essay, on a 2-core machine.
pub const ANSWER_TOKENS: usize = 160;

/// What the gate decided.
#[derive(Debug, Clone)]
pub struct Gated {
    /// The verdict on the user's last turn.
    pub question: Verdict,
    /// The answer the model wrote and its verdict, when the question passed.
    pub answer: Option<(String, Verdict)>,
}

impl Gated {
    /// What the user is shown: the answer when both passed, else the first rejection.
    pub fn response(&self) -> &str {
        match &self.answer {
            _ if self.question.status == Status::Failed => &self.question.rejection_message,
            Some((_, verdict)) if verdict.status == Status::Failed => &verdict.rejection_message,
            Some((answer, _)) => answer,
            None => "",
        }
    }

    pub fn can_proceed(&self) -> bool {
        self.question.status == Status::Passed
            && self
                .answer
                .as_ref()
                .is_some_and(|(_, v)| v.status == Status::Passed)
    }
}

/// Runs the gate on `turns`, whose last turn is the user's. Each check goes through the worker's
/// queue and, with a `store`, into history with its context; the answer is written by the worker
/// too, at most `answer_tokens` long, from the most recent turns that fit the model's context
/// with room for it.
pub async fn answer_gate(
    worker: &Worker,
    store: Option<&Store>,
    submitter: Submitter<'_>,
    turns: Vec<Turn>,
    answer_tokens: usize,
) -> Result<Gated, WorkerError> {
    let check = |input: GuardInput| async move {
        let Some(store) = store else {
            return Ok::<_, WorkerError>(worker.check(input).await?.verdict);
        };
        let recorded = check_and_record(worker, store, input, submitter).await?;
        // The verdict stands even when history could not keep it, as for any API check.
        if let Err(e) = recorded.verdict_id {
            tracing::error!(error = %e, "recording a gated verdict failed");
        }
        Ok(recorded.checked.verdict)
    };
    let mut inputs = GuardInput::from_conversation(&turns, aegis_guard::TurnsChecked::Last)?;
    let question = check(inputs.remove(0)).await?;
    if question.status == Status::Failed {
        return Ok(Gated {
            question,
            answer: None,
        });
    }
    let written = worker.answer(turns.clone(), answer_tokens).await?;
    let answer = written.trim().to_string();
    let verdict = check(GuardInput::answer(turns, answer.clone())).await?;
    Ok(Gated {
        question,
        answer: Some((answer, verdict)),
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use aegis_engine::testing::FakeModel;
    use aegis_guard::{Guard, Validator};

    use super::*;

    const NOBODY: Submitter<'static> = Submitter {
        source: aegis_store::Source::Http,
        user_id: None,
    };

    /// A guard whose one validator fails any prompt holding "BBCA", and whose model answers
    /// `answer`.
    async fn worker(answer: &'static str) -> Worker {
        let template = "---\nname: Financial advice\nrejection:\n  id: Maaf.\n  en: Sorry, no financial advice.\n---\n{{message}}\nAdvice?\n";
        let validator =
            Validator::parse(Path::new("financial_advice.txt"), template).expect("template");
        let mut model = FakeModel::new(vec![("BBCA", 0.9)]);
        model.generated = Some(answer);
        // Room for the question and an answer of ANSWER_TOKENS (a word is a token here).
        model.info.context_length = 1024;
        let worker = Worker::start(4, move || Ok(Guard::new(Arc::new(model), vec![validator])));
        worker.settled().await;
        worker
    }

    #[tokio::test]
    async fn a_failed_answer_is_replaced_by_the_rejection() {
        let gated = answer_gate(
            &worker("Buy BBCA now, it will rise 30%.").await,
            None,
            NOBODY,
            vec![Turn::user("What should I do with my bonus?")],
            ANSWER_TOKENS,
        )
        .await
        .expect("gated");
        assert_eq!(gated.question.status, Status::Passed);
        let (answer, verdict) = gated.answer.as_ref().expect("an answer was written");
        assert_eq!(answer, "Buy BBCA now, it will rise 30%.");
        assert_eq!(verdict.turn.role, aegis_guard::Role::Assistant);
        assert_eq!(verdict.turn.index, 1);
        assert_eq!(gated.response(), "Sorry, no financial advice.");
        assert!(!gated.can_proceed());
    }

    #[tokio::test]
    async fn a_passing_answer_is_shown_and_a_failed_question_gets_no_answer() {
        let worker = worker("We open at 9 in the morning.").await;
        let gated = answer_gate(
            &worker,
            None,
            NOBODY,
            vec![Turn::user("When do you open?")],
            ANSWER_TOKENS,
        )
        .await
        .expect("gated");
        assert_eq!(gated.response(), "We open at 9 in the morning.");
        assert!(gated.can_proceed());
        let refused = answer_gate(
            &worker,
            None,
            NOBODY,
            vec![Turn::user("Should I buy BBCA?")],
            ANSWER_TOKENS,
        )
        .await
        .expect("gated");
        assert!(refused.answer.is_none());
        assert_eq!(refused.response(), "Sorry, no financial advice.");
    }
}
