//! A validator's examples as the console keeps them: typed, marked on verdicts, proposed by a
//! reviewer or a client, accepted, relabelled and removed, each as the console's member.

use aegis_guard::Language;
use aegis_store::{ExampleOrigin, NewExample, StoredExample};
use serde::Serialize;

use crate::console::Console;
use crate::error::ConsoleError;

/// What a "should fail / should pass" mark did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Marked {
    /// The example the message became (an existing one when it merged).
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub example_id: i64,
    /// A reviewer's mark, in a team: proposed, trained on once an author accepts it.
    pub proposed: bool,
}

impl Console {
    pub async fn examples(&self, validator: &str) -> Result<Vec<StoredExample>, ConsoleError> {
        Ok(self.store().examples(Some(validator)).await?)
    }

    /// Whether this console's member trains on examples at once (no team, an author or an
    /// admin), or only proposes them for an author to accept (a reviewer).
    pub async fn may_teach(&self) -> Result<bool, ConsoleError> {
        Ok(self.store().may_teach(&self.actor()).await?)
    }

    /// Teaches `validator` one text; returns the example's id (an existing one when merged).
    pub async fn add_example(
        &self,
        validator: &str,
        text: &str,
        violates: bool,
        origin: ExampleOrigin,
        verdict_id: Option<i64>,
    ) -> Result<i64, ConsoleError> {
        self.known_validator(validator)?;
        if text.trim().is_empty() {
            return Err(ConsoleError::Invalid("an example needs some text".into()));
        }
        let added = self
            .store()
            .add_example(
                &self.actor(),
                &NewExample {
                    validator: validator.to_string(),
                    text: text.to_string(),
                    violates,
                    language: Language::detect(text).code().to_string(),
                    origin,
                    verdict_id,
                    submitted_by: None,
                },
            )
            .await?;
        Ok(added.id())
    }

    /// "Should fail" / "should pass" on a recorded verdict: its text becomes an example, proposed
    /// when the console's name is a reviewer's in a team.
    pub async fn mark_verdict(
        &self,
        verdict_id: i64,
        validator: &str,
        violates: bool,
    ) -> Result<Marked, ConsoleError> {
        let detail = self.verdict(verdict_id).await?;
        let proposed = !self.may_teach().await?;
        let example_id = self
            .add_example(
                validator,
                &detail.row.text,
                violates,
                ExampleOrigin::Mark,
                Some(verdict_id),
            )
            .await?;
        Ok(Marked {
            example_id,
            proposed,
        })
    }

    pub async fn relabel_example(&self, id: i64, violates: bool) -> Result<i64, ConsoleError> {
        Ok(self
            .store()
            .relabel_example(&self.actor(), id, violates)
            .await?
            .id())
    }

    pub async fn remove_example(&self, id: i64) -> Result<bool, ConsoleError> {
        Ok(self.store().remove_example(&self.actor(), id).await?)
    }

    /// Accepts a client's proposed example (from /feedback), so training uses it.
    pub async fn accept_example(&self, id: i64) -> Result<bool, ConsoleError> {
        Ok(self.store().accept_example(&self.actor(), id).await?)
    }
}
