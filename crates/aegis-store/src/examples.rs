//! Labelled examples per validator: what a prompt author teaches a head with. Adding a text that
//! is already there with the same label merges into it (and counts it); the same text with the
//! other label is kept beside it, a contradiction to show, never resolved silently.

use serde::{Deserialize, Serialize};

use crate::error::{Result, StoreError};
use crate::open::Store;
use crate::team::MemberRole;
use crate::time::now_millis;

/// Longest example text kept, in bytes: the guard's own input limit is far below this.
const MAX_EXAMPLE_BYTES: usize = 32 * 1024;

/// Proposed examples one validator may hold unreviewed: a client cannot fill the database, and a
/// reviewer is not handed more than a sitting's work.
pub const MAX_PENDING_PER_VALIDATOR: usize = 500;

/// Where an example came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum ExampleOrigin {
    /// A reviewer's agree or overturn.
    Review,
    /// A "should fail / should pass" mark on a Check result or a History row.
    Mark,
    /// A labelled file.
    Import,
    /// `POST /feedback` on the HTTP API.
    Feedback,
    /// Typed in the Teach view or given to `aegis examples add`.
    Manual,
    /// A label on a message the labelling queue suggested (the Teach view's queue, `aegis
    /// examples add|import --suggested`). Suggestions are chosen where the head is unsure or
    /// wrong, so the default line is measured on the author's other examples.
    Suggestion,
}

impl ExampleOrigin {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Review => "review",
            Self::Mark => "mark",
            Self::Import => "import",
            Self::Feedback => "feedback",
            Self::Manual => "manual",
            Self::Suggestion => "suggestion",
        }
    }
}

impl std::str::FromStr for ExampleOrigin {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "review" => Self::Review,
            "mark" => Self::Mark,
            "import" => Self::Import,
            "feedback" => Self::Feedback,
            "manual" => Self::Manual,
            "suggestion" => Self::Suggestion,
            other => {
                return Err(StoreError::Invalid(format!(
                    "unknown example origin {other:?}: use review, mark, import, feedback, manual or suggestion"
                )))
            }
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewExample {
    pub validator: String,
    pub text: String,
    /// `true`: the text violates the validator's policy (it should fail).
    pub violates: bool,
    pub language: String,
    pub origin: ExampleOrigin,
    pub verdict_id: Option<i64>,
    /// Who sent it, for examples from outside the console (the HTTP client's address).
    pub submitted_by: Option<String>,
}

impl NewExample {
    /// Only a reviewer's own examples are trained on at once; a client's feedback is proposed.
    pub fn is_proposal(&self) -> bool {
        self.origin == ExampleOrigin::Feedback
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct StoredExample {
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub id: i64,
    pub validator: String,
    pub text: String,
    pub violates: bool,
    pub language: String,
    pub origin: ExampleOrigin,
    #[cfg_attr(feature = "ts", ts(type = "number | null"))]
    pub verdict_id: Option<i64>,
    /// How many times it was added; duplicates merge into one row.
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub times_added: i64,
    /// The same text is also stored with the other label.
    pub contradicted: bool,
    /// Proposed through /feedback and not yet accepted by a reviewer: not trained on.
    pub pending: bool,
    pub submitted_by: Option<String>,
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub updated_at: i64,
}

/// What adding an example did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Added {
    New {
        id: i64,
    },
    /// The same text with the same label was there: it was counted again.
    Merged {
        id: i64,
    },
}

impl Added {
    pub fn id(self) -> i64 {
        match self {
            Self::New { id } | Self::Merged { id } => id,
        }
    }
}

/// The text as duplicates are recognised: trimmed, whitespace runs made one space.
fn normalize(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn check_new(example: &NewExample) -> Result<String> {
    if example.validator.trim().is_empty() {
        return Err(StoreError::Invalid("an example needs a validator".into()));
    }
    let normalized = normalize(&example.text);
    if normalized.is_empty() {
        return Err(StoreError::Invalid("an example needs some text".into()));
    }
    if example.text.len() > MAX_EXAMPLE_BYTES {
        return Err(StoreError::Invalid(format!(
            "an example is at most {MAX_EXAMPLE_BYTES} bytes; this one is {}",
            example.text.len()
        )));
    }
    Ok(normalized)
}

const SELECT_EXAMPLES: &str = "SELECT e.id, e.validator_key, e.text, e.label, e.language, e.origin,
        e.verdict_id, e.times_added, e.updated_at, 1 - e.accepted, e.submitted_by,
        CASE WHEN EXISTS (SELECT 1 FROM examples o WHERE o.validator_key = e.validator_key
                AND o.normalized = e.normalized AND o.label <> e.label) THEN 1 ELSE 0 END
     FROM examples e";

/// Flags are 0 or 1 on both engines (one query text binds and reads the same types).
type ExampleRow = (
    i64,
    String,
    String,
    i64,
    String,
    String,
    Option<i64>,
    i64,
    i64,
    i64,
    Option<String>,
    i64,
);

fn into_example(row: ExampleRow) -> Result<StoredExample> {
    let (
        id,
        validator,
        text,
        violates,
        language,
        origin,
        verdict_id,
        times_added,
        updated_at,
        pending,
        submitted_by,
        contradicted,
    ) = row;
    Ok(StoredExample {
        id,
        validator,
        text,
        violates: violates != 0,
        language,
        origin: origin.parse()?,
        verdict_id,
        times_added,
        contradicted: contradicted != 0,
        pending: pending != 0,
        submitted_by,
        updated_at,
    })
}

impl Store {
    /// Adds an example, merging it into an identical one (same validator, text and label).
    ///
    /// A client's feedback is proposed whoever sends it. In a team, `actor` must be a member: an
    /// author's or admin's example is trained on at once, a reviewer's is proposed for an author
    /// to accept ([`Store::may_teach`] says which beforehand).
    pub async fn add_example(&self, actor: &str, example: &NewExample) -> Result<Added> {
        let normalized = check_new(example)?;
        let now = now_millis();
        let mut tx = self.writer.begin().await.map_err(|e| self.sql(e))?;
        let proposed = if example.is_proposal() {
            true
        } else {
            let standing = self.standing(&mut tx, actor).await?;
            standing.require(actor, MemberRole::Reviewer, "add examples")?;
            !standing.allows(MemberRole::Author)
        };
        let existing = self
            .twin(&mut tx, &example.validator, &normalized, example.violates)
            .await?;
        let added = if let Some(id) = existing {
            self.count_again(&mut tx, id, 1, now).await?;
            if !proposed {
                // An author saying the same as a proposal accepts it.
                self.set_accepted(&mut tx, id).await?;
            }
            Added::Merged { id }
        } else {
            if proposed {
                self.room_for_a_proposal(&mut tx, &example.validator)
                    .await?;
            }
            let id = sqlx::query_scalar(
                "INSERT INTO examples (validator_key, text, normalized, label, language, origin,
                     verdict_id, created_at, updated_at, accepted, submitted_by)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING id",
            )
            .bind(&example.validator)
            .bind(example.text.trim())
            .bind(&normalized)
            .bind(i64::from(example.violates))
            .bind(&example.language)
            .bind(example.origin.as_str())
            .bind(example.verdict_id)
            .bind(now)
            .bind(now)
            .bind(i64::from(!proposed))
            // A member's proposal names them, so the Teach view says whose it is and they may
            // withdraw it; a client's names what it sent as.
            .bind(
                example
                    .submitted_by
                    .as_deref()
                    .or((proposed && !example.is_proposal()).then_some(actor.trim())),
            )
            .fetch_one(&mut *tx)
            .await
            .map_err(|e| self.sql(e))?;
            Added::New { id }
        };
        // A client's feedback is the server's to log; a member's example is the team's record.
        if !example.is_proposal() {
            let action = if proposed {
                "example proposed"
            } else {
                "example added"
            };
            let detail = serde_json::json!({
                "id": added.id(),
                "violates": example.violates,
                "origin": example.origin.as_str(),
                "merged": matches!(added, Added::Merged { .. }),
            });
            self.audit(&mut tx, actor, action, &example.validator, detail)
                .await?;
        }
        tx.commit().await.map_err(|e| self.sql(e))?;
        Ok(added)
    }

    /// A validator's examples (every validator's when `None`), oldest first.
    pub async fn examples(&self, validator: Option<&str>) -> Result<Vec<StoredExample>> {
        let rows: Vec<ExampleRow> = match validator {
            Some(key) => {
                sqlx::query_as(&format!(
                    "{SELECT_EXAMPLES} WHERE e.validator_key = $1 ORDER BY e.id"
                ))
                .bind(key)
                .fetch_all(&self.reader)
                .await
            }
            None => {
                sqlx::query_as(&format!("{SELECT_EXAMPLES} ORDER BY e.validator_key, e.id"))
                    .fetch_all(&self.reader)
                    .await
            }
        }
        .map_err(|e| self.sql(e))?;
        rows.into_iter().map(into_example).collect()
    }

    /// Changes an example's label (an author's work, in a team). If the text already has the new
    /// label, the two merge.
    pub async fn relabel_example(&self, actor: &str, id: i64, violates: bool) -> Result<Added> {
        let mut tx = self.writer.begin().await.map_err(|e| self.sql(e))?;
        self.authorize(&mut tx, actor, MemberRole::Author, "relabel examples")
            .await?;
        let row: Option<(String, String, i64, i64)> = sqlx::query_as(
            "SELECT validator_key, normalized, label, times_added FROM examples WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| self.sql(e))?;
        let Some((validator, normalized, label, times)) = row else {
            return Err(StoreError::Invalid(format!("no example {id}")));
        };
        if (label != 0) == violates {
            return Ok(Added::Merged { id });
        }
        let now = now_millis();
        let twin = self
            .twin(&mut tx, &validator, &normalized, violates)
            .await?;
        // Relabelling is a reviewer's decision on the text, so it also accepts a proposal.
        let added = if let Some(twin) = twin {
            self.count_again(&mut tx, twin, times, now).await?;
            self.set_accepted(&mut tx, twin).await?;
            sqlx::query("DELETE FROM examples WHERE id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await
                .map_err(|e| self.sql(e))?;
            Added::Merged { id: twin }
        } else {
            sqlx::query(
                "UPDATE examples SET label = $1, updated_at = $2, accepted = 1 WHERE id = $3",
            )
            .bind(i64::from(violates))
            .bind(now)
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(|e| self.sql(e))?;
            Added::Merged { id }
        };
        let detail = serde_json::json!({ "id": id, "violates": violates, "now": added.id() });
        self.audit(&mut tx, actor, "example relabelled", &validator, detail)
            .await?;
        tx.commit().await.map_err(|e| self.sql(e))?;
        Ok(added)
    }

    /// The example with this validator, text and label, if there is one: a new one merges into it.
    async fn twin(
        &self,
        tx: &mut sqlx::AnyConnection,
        validator: &str,
        normalized: &str,
        violates: bool,
    ) -> Result<Option<i64>> {
        sqlx::query_scalar(
            "SELECT id FROM examples WHERE validator_key = $1 AND normalized = $2 AND label = $3",
        )
        .bind(validator)
        .bind(normalized)
        .bind(i64::from(violates))
        .fetch_optional(tx)
        .await
        .map_err(|e| self.sql(e))
    }

    async fn count_again(
        &self,
        tx: &mut sqlx::AnyConnection,
        id: i64,
        times: i64,
        now: i64,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE examples SET times_added = times_added + $1, updated_at = $2 WHERE id = $3",
        )
        .bind(times)
        .bind(now)
        .bind(id)
        .execute(tx)
        .await
        .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// Accepts a proposed example, so it is trained on (an author's work, in a team); `false`
    /// when there is none with that id.
    pub async fn accept_example(&self, actor: &str, id: i64) -> Result<bool> {
        let mut tx = self.writer.begin().await.map_err(|e| self.sql(e))?;
        self.authorize(&mut tx, actor, MemberRole::Author, "accept examples")
            .await?;
        let found = self.set_accepted(&mut tx, id).await?;
        if found {
            let validator = self.example_validator(&mut tx, id).await?;
            self.audit(
                &mut tx,
                actor,
                "example accepted",
                &validator,
                serde_json::json!({ "id": id }),
            )
            .await?;
        }
        tx.commit().await.map_err(|e| self.sql(e))?;
        Ok(found)
    }

    async fn example_validator(&self, tx: &mut sqlx::AnyConnection, id: i64) -> Result<String> {
        sqlx::query_scalar("SELECT validator_key FROM examples WHERE id = $1")
            .bind(id)
            .fetch_one(tx)
            .await
            .map_err(|e| self.sql(e))
    }

    async fn set_accepted(&self, tx: &mut sqlx::AnyConnection, id: i64) -> Result<bool> {
        let done = sqlx::query("UPDATE examples SET accepted = 1 WHERE id = $1")
            .bind(id)
            .execute(tx)
            .await
            .map_err(|e| self.sql(e))?;
        Ok(done.rows_affected() > 0)
    }

    /// Refuses a new proposal when the validator's are at [`MAX_PENDING_PER_VALIDATOR`].
    async fn room_for_a_proposal(
        &self,
        tx: &mut sqlx::AnyConnection,
        validator: &str,
    ) -> Result<()> {
        let pending: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM examples WHERE validator_key = $1 AND accepted = 0",
        )
        .bind(validator)
        .fetch_one(tx)
        .await
        .map_err(|e| self.sql(e))?;
        if pending as usize >= MAX_PENDING_PER_VALIDATOR {
            return Err(StoreError::TooManyPending {
                validator: validator.to_string(),
                limit: MAX_PENDING_PER_VALIDATOR,
            });
        }
        Ok(())
    }

    /// Removes an example (an author's work, in a team, though a reviewer may withdraw a
    /// proposal of their own that no one else has added since); `false` when there was none
    /// with that id.
    pub async fn remove_example(&self, actor: &str, id: i64) -> Result<bool> {
        let mut tx = self.writer.begin().await.map_err(|e| self.sql(e))?;
        let standing = self.standing(&mut tx, actor).await?;
        let author = standing.allows(MemberRole::Author);
        let member = standing.allows(MemberRole::Reviewer);
        // One statement decides and deletes, so an author's accept cannot land between a
        // reviewer's check that a proposal is still theirs and its deletion.
        let removed: Option<(String, String, i64)> = sqlx::query_as(
            "DELETE FROM examples
             WHERE id = $1 AND ($2 = 1 OR ($3 = 1 AND accepted = 0 AND times_added = 1
                                           AND submitted_by = $4))
             RETURNING validator_key, text, label",
        )
        .bind(id)
        .bind(i64::from(author))
        .bind(i64::from(member))
        .bind(actor.trim())
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| self.sql(e))?;
        let Some((validator, text, label)) = &removed else {
            standing.require(actor, MemberRole::Author, "remove examples")?;
            return Ok(false);
        };
        // The text goes into the log: a removed example cannot be looked up afterwards.
        let detail = serde_json::json!({ "id": id, "text": text, "violates": *label != 0 });
        let action = if author {
            "example removed"
        } else {
            "example withdrawn"
        };
        self.audit(&mut tx, actor, action, validator, detail)
            .await?;
        tx.commit().await.map_err(|e| self.sql(e))?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_are_recognised_across_whitespace() {
        assert_eq!(normalize("  Buy   now\n cheap "), "Buy now cheap");
    }

    #[test]
    fn empty_or_oversized_text_is_refused() {
        let mut example = NewExample {
            validator: "spam".into(),
            text: " \n ".into(),
            violates: true,
            language: "en".into(),
            origin: ExampleOrigin::Manual,
            verdict_id: None,
            submitted_by: None,
        };
        assert!(check_new(&example).is_err());
        example.text = "x".repeat(MAX_EXAMPLE_BYTES + 1);
        assert!(check_new(&example).is_err());
        example.text = "ok".into();
        example.validator = "".into();
        assert!(check_new(&example).is_err());
    }
}
