//! The team's review queue: unreviewed verdicts that failed or came close to a threshold, the most
//! uncertain first, handed out in claimed batches so that two reviewers never decide the same
//! message unless the queue asks for both (its overlap share, which measures agreement); and saved
//! template versions.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use sqlx::Row;

use crate::database::Engine;
use crate::error::{Result, StoreError};
use crate::open::Store;
use crate::query::HistoryRow;
use crate::sql::{lock_rows, Sql};
use crate::team::reviewer_name;
use crate::team::MemberRole;
use crate::time::{format_millis, now_millis};

/// The queue's rules, kept in the history database so that every console of a team follows the
/// same ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct QueuePolicy {
    /// Of every hundred queued verdicts, how many two reviewers decide apart (0 to 100): the
    /// sample their agreement is measured on.
    pub overlap_percent: u32,
    /// How long a claimed verdict stays with its reviewer undecided before the queue hands it to
    /// someone else (a console that closed or died gives its batch back this way).
    pub claim_seconds: u32,
}

impl Default for QueuePolicy {
    /// One reviewer per message: a console on its own has no one to overlap with.
    fn default() -> Self {
        Self {
            overlap_percent: 0,
            claim_seconds: 30 * 60,
        }
    }
}

impl QueuePolicy {
    pub const MAX_CLAIM_SECONDS: u32 = 7 * 24 * 60 * 60;

    pub fn validate(&self) -> Result<()> {
        if self.overlap_percent > 100 {
            return Err(StoreError::Invalid(format!(
                "the overlap share is a percentage from 0 to 100, not {}",
                self.overlap_percent
            )));
        }
        if !(1..=Self::MAX_CLAIM_SECONDS).contains(&self.claim_seconds) {
            return Err(StoreError::Invalid(format!(
                "a claim lasts from 1 second to a week ({} seconds), not {}",
                Self::MAX_CLAIM_SECONDS,
                self.claim_seconds
            )));
        }
        Ok(())
    }

    /// Reviewers verdict `verdict_id` wants: two for the overlap share, else one. The share is
    /// picked by spreading ids over a hundred places (37 is prime to 100, so consecutive ids, an
    /// import's rows, land far apart and every hundred ids hold exactly the share).
    pub fn reviewers_wanted(&self, verdict_id: i64) -> usize {
        if overlap_place(verdict_id) < i64::from(self.overlap_percent) {
            2
        } else {
            1
        }
    }

    fn claim_millis(&self) -> i64 {
        i64::from(self.claim_seconds) * 1000
    }
}

fn overlap_place(verdict_id: i64) -> i64 {
    (verdict_id.rem_euclid(100) * 37) % 100
}

/// Claims as rows of `VALUES` follow; a reviewer's claim on a verdict they hold already is renewed.
const CLAIM_INSERT: &str =
    "INSERT INTO review_claims (verdict_id, reviewer, claimed_at, expires_at) VALUES ";
const CLAIM_RENEWS: &str = " ON CONFLICT (verdict_id, reviewer) DO UPDATE SET claimed_at = excluded.claimed_at, expires_at = excluded.expires_at";

/// The same spreading in SQL, for the queue's own queries.
const OVERLAP_PLACE_SQL: &str = "((m.id % 100) * 37) % 100";

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ReviewQueue {
    /// The batch claimed for this reviewer, the most uncertain first.
    pub items: Vec<HistoryRow>,
    /// Verdicts still waiting for this reviewer or anyone (beyond the batch too): those that want
    /// more reviewers than they have, less those other reviewers hold.
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub remaining: i64,
    /// Unix milliseconds when the batch's claims expire unless claimed again.
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub claimed_until: i64,
}

/// Who already holds a verdict: the reviewers who decided it and those whose claims still run.
#[derive(Debug, Default)]
struct Holders {
    decided: BTreeSet<String>,
    /// Reviewer and expiry of each unexpired claim.
    claims: BTreeMap<String, i64>,
}

impl Holders {
    /// Whether `reviewer` may take the verdict: they decided it before (deciding again replaces
    /// their own decision), they hold a claim on it, or it wants more reviewers than it has
    /// counting everyone else's claims. `Err` says who holds it.
    fn admit(&self, reviewer: &str, wanted: usize) -> std::result::Result<(), String> {
        if self.decided.contains(reviewer) || self.claims.contains_key(reviewer) {
            return Ok(());
        }
        if self.decided.len() + self.claims.len() < wanted {
            return Ok(());
        }
        let decided: Vec<&str> = self.decided.iter().map(String::as_str).collect();
        let claimed: Vec<String> = self
            .claims
            .iter()
            .map(|(who, until)| format!("{who} until {}", format_millis(*until)))
            .collect();
        Err(match (decided.is_empty(), claimed.is_empty()) {
            (false, true) => format!("already decided by {}", decided.join(" and ")),
            (true, false) => format!("claimed by {}", claimed.join(" and ")),
            _ => format!(
                "decided by {} and claimed by {}",
                decided.join(" and "),
                claimed.join(" and ")
            ),
        })
    }
}

/// The queue's members `$2` may take, most uncertain first. Members: verdicts not yet settled
/// (`review_done`) that failed, or where some score came within the margin (`$4`) of its
/// threshold. Open to `$2`: not decided by them, and wanting more reviewers than have decided or
/// hold unexpired claims (`$3` is now) other than theirs; the overlap share (`$1` percent) wants
/// two. The partial index on unsettled verdicts keeps this a walk over the queue, not the history.
/// `q` holds only the select list: the numbers above are its first values.
fn open_to(q: &mut Sql, margin: f64, reviewer: &str, now: i64, policy: &QueuePolicy) {
    q.push(format!(
        "FROM verdicts m
          WHERE m.review_done = 0
            AND (m.status = 'failed' OR m.uncertainty < $4)
            AND NOT EXISTS (SELECT 1 FROM reviews rv WHERE rv.verdict_id = m.id AND rv.reviewer = $2)
            AND (SELECT count(DISTINCT rv.reviewer) FROM reviews rv WHERE rv.verdict_id = m.id)
              + (SELECT count(*) FROM review_claims c WHERE c.verdict_id = m.id AND c.reviewer <> $2 AND c.expires_at > $3)
              < CASE WHEN {OVERLAP_PLACE_SQL} < $1 THEN 2 ELSE 1 END"
    ));
    // Bound in the order of the numbers written above; $2 is named twice.
    q.bind(i64::from(policy.overlap_percent))
        .bind(reviewer.to_string())
        .bind(now)
        .bind(margin);
}

impl Store {
    pub async fn queue_policy(&self) -> Result<QueuePolicy> {
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT key, value FROM settings WHERE key IN ('review_overlap_percent', 'review_claim_seconds')",
        )
        .fetch_all(&self.reader)
        .await
        .map_err(|e| self.sql(e))?;
        let mut policy = QueuePolicy::default();
        for (key, value) in rows {
            let number = value.parse::<u32>().map_err(|_| {
                StoreError::Invalid(format!(
                    "the queue setting {key} is not a number: {value:?}"
                ))
            })?;
            match key.as_str() {
                "review_overlap_percent" => policy.overlap_percent = number,
                _ => policy.claim_seconds = number,
            }
        }
        Ok(policy)
    }

    pub async fn set_queue_policy(&self, actor: &str, policy: &QueuePolicy) -> Result<()> {
        policy.validate()?;
        let mut tx = self.begin_deciding().await?;
        self.authorize(&mut tx, actor, MemberRole::Admin, "change the review queue")
            .await?;
        for (key, value) in [
            ("review_overlap_percent", policy.overlap_percent),
            ("review_claim_seconds", policy.claim_seconds),
        ] {
            sqlx::query(
                "INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            )
            .bind(key)
            .bind(value.to_string())
            .execute(&mut *tx)
            .await
            .map_err(|e| self.sql(e))?;
        }
        self.audit(
            &mut tx,
            actor,
            "queue changed",
            "review queue",
            serde_json::json!({
                "overlap_percent": policy.overlap_percent,
                "claim_seconds": policy.claim_seconds,
            }),
        )
        .await?;
        tx.commit().await.map_err(|e| self.sql(e))
    }

    /// Claims up to `size` queued verdicts for `reviewer` (renewing those they hold already) and
    /// returns them. Two consoles claiming at once get different verdicts: on PostgreSQL each
    /// skips the rows the other has locked (`FOR UPDATE SKIP LOCKED`) and counts holders again
    /// once it holds the lock; SQLite's one writer runs claims one after another.
    pub async fn claim_reviews(
        &self,
        reviewer: &str,
        margin: f64,
        size: u32,
    ) -> Result<ReviewQueue> {
        let reviewer = reviewer_name(reviewer)?;
        let policy = self.queue_policy().await?;
        let now = now_millis();
        let claimed_until = now + policy.claim_millis();
        let mut tx = self.begin_deciding().await?;
        self.authorize(&mut tx, reviewer, MemberRole::Reviewer, "claim verdicts")
            .await?;
        sqlx::query("DELETE FROM review_claims WHERE expires_at <= $1")
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(|e| self.sql(e))?;
        let mut q = Sql::new("SELECT m.id ");
        open_to(&mut q, margin, reviewer, now, &policy);
        q.push(" ORDER BY m.uncertainty ASC, m.id DESC LIMIT ")
            .push_bind(i64::from(size.clamp(1, 1000)));
        q.push(match self.engine() {
            Engine::Sqlite => "",
            Engine::Postgres => " FOR UPDATE SKIP LOCKED",
        });
        let (text, args) = q.into_parts().map_err(|e| self.sql(e))?;
        let candidates: Vec<i64> = sqlx::query_scalar_with(&text, args)
            .fetch_all(&mut *tx)
            .await
            .map_err(|e| self.sql(e))?;
        // Counted again under the lock: a console that claimed and committed after this query's
        // snapshot was taken is seen now, and no one can claim these rows until this commits.
        let holders = self.holders(&mut tx, &candidates, now).await?;
        let claimed: Vec<i64> = candidates
            .into_iter()
            .filter(|id| {
                let wanted = policy.reviewers_wanted(*id);
                holders
                    .get(id)
                    .is_none_or(|h| h.admit(reviewer, wanted).is_ok())
            })
            .collect();
        if !claimed.is_empty() {
            let mut insert = Sql::new(CLAIM_INSERT);
            for id in &claimed {
                insert
                    .begin_row()
                    .value(*id)
                    .value(reviewer.to_string())
                    .value(now)
                    .value(claimed_until)
                    .end_row();
            }
            insert.push(CLAIM_RENEWS);
            let (text, args) = insert.into_parts().map_err(|e| self.sql(e))?;
            sqlx::query_with(&text, args)
                .execute(&mut *tx)
                .await
                .map_err(|e| self.sql(e))?;
        }
        tx.commit().await.map_err(|e| self.sql(e))?;

        let items = self.rows_by_id(&claimed).await?;
        let mut count = Sql::new("SELECT count(*) ");
        open_to(&mut count, margin, reviewer, now, &policy);
        let (text, args) = count.into_parts().map_err(|e| self.sql(e))?;
        let remaining = sqlx::query_scalar_with(&text, args)
            .fetch_one(&self.reader)
            .await
            .map_err(|e| self.sql(e))?;
        Ok(ReviewQueue {
            items,
            remaining,
            claimed_until,
        })
    }

    /// Gives back every verdict `reviewer` holds undecided (a console closing its queue); how
    /// many.
    pub async fn release_claims(&self, reviewer: &str) -> Result<u64> {
        let done = sqlx::query("DELETE FROM review_claims WHERE reviewer = $1")
            .bind(reviewer.trim())
            .execute(&self.writer)
            .await
            .map_err(|e| self.sql(e))?;
        Ok(done.rows_affected())
    }

    /// Who holds each of `verdict_ids` now, read inside `tx` after their rows were locked.
    async fn holders(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        verdict_ids: &[i64],
        now: i64,
    ) -> Result<BTreeMap<i64, Holders>> {
        let mut holders: BTreeMap<i64, Holders> = BTreeMap::new();
        if verdict_ids.is_empty() {
            return Ok(holders);
        }
        let mut q = Sql::new("SELECT verdict_id, reviewer, 0 FROM reviews WHERE verdict_id IN (");
        q.push_binds(verdict_ids.iter().copied())
            .push(") UNION ALL SELECT verdict_id, reviewer, expires_at FROM review_claims WHERE expires_at > ")
            .push_bind(now)
            .push(" AND verdict_id IN (")
            .push_binds(verdict_ids.iter().copied())
            .push(")");
        let (text, args) = q.into_parts().map_err(|e| self.sql(e))?;
        let rows = sqlx::query_with(&text, args)
            .fetch_all(&mut **tx)
            .await
            .map_err(|e| self.sql(e))?;
        for row in rows {
            let id: i64 = row.try_get(0).map_err(|e| self.sql(e))?;
            let reviewer: String = row.try_get(1).map_err(|e| self.sql(e))?;
            let expires_at: i64 = row.try_get(2).map_err(|e| self.sql(e))?;
            let entry = holders.entry(id).or_default();
            if expires_at == 0 {
                entry.decided.insert(reviewer);
            } else {
                entry.claims.insert(reviewer, expires_at);
            }
        }
        Ok(holders)
    }

    /// Inside a review's transaction: locks the verdict's row and refuses when it is someone
    /// else's (decided or claimed, and wanting no more reviewers). Frees the reviewer's claim,
    /// which the review being written settles.
    pub(crate) async fn take_for_review(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        verdict_id: i64,
        reviewer: &str,
    ) -> Result<usize> {
        let locked: Option<i64> = sqlx::query_scalar(&format!(
            "SELECT id FROM verdicts WHERE id = $1{}",
            lock_rows(self.engine())
        ))
        .bind(verdict_id)
        .fetch_optional(&mut **tx)
        .await
        .map_err(|e| self.sql(e))?;
        if locked.is_none() {
            return Err(StoreError::Invalid(format!(
                "no verdict {verdict_id} in history"
            )));
        }
        let wanted = self.queue_policy().await?.reviewers_wanted(verdict_id);
        let holders = self.holders(tx, &[verdict_id], now_millis()).await?;
        if let Some(holders) = holders.get(&verdict_id) {
            holders
                .admit(reviewer, wanted)
                .map_err(|detail| StoreError::Taken { verdict_id, detail })?;
        }
        sqlx::query("DELETE FROM review_claims WHERE verdict_id = $1 AND reviewer = $2")
            .bind(verdict_id)
            .bind(reviewer)
            .execute(&mut **tx)
            .await
            .map_err(|e| self.sql(e))?;
        Ok(wanted)
    }

    /// Marks the verdict settled, and out of the queue, once as many reviewers as it wants have
    /// decided it; unsettled again when a review is taken back.
    pub(crate) async fn settle(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        verdict_id: i64,
        wanted: usize,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE verdicts SET review_done = CASE WHEN
                (SELECT count(DISTINCT reviewer) FROM reviews WHERE verdict_id = $1) >= $2 THEN 1 ELSE 0 END
              WHERE id = $1",
        )
        .bind(verdict_id)
        .bind(wanted as i64)
        .execute(&mut **tx)
        .await
        .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// Takes a review back (a reviewer's undo): the verdict returns to the queue claimed by the
    /// same reviewer, so it stays in their batch. In a team, reviewers undo their own decisions
    /// and admins anyone's. False when there was no review with this id.
    pub async fn delete_review(&self, actor: &str, review_id: i64) -> Result<bool> {
        let policy = self.queue_policy().await?;
        let mut tx = self.begin_deciding().await?;
        self.authorize(&mut tx, actor, MemberRole::Reviewer, "undo decisions")
            .await?;
        // The verdict is locked first, as a claim locks it: a console claiming it at this moment
        // either sees the review or, once this commits, the claim given back in its place.
        sqlx::query(&format!(
            "SELECT v.id FROM verdicts v JOIN reviews rv ON rv.verdict_id = v.id WHERE rv.id = $1{}",
            lock_rows(self.engine())
        ))
        .bind(review_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| self.sql(e))?;
        let taken: Option<(i64, String)> =
            sqlx::query_as("DELETE FROM reviews WHERE id = $1 RETURNING verdict_id, reviewer")
                .bind(review_id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(|e| self.sql(e))?;
        let Some((verdict_id, reviewer)) = taken else {
            return Ok(false);
        };
        if reviewer != actor.trim() {
            self.authorize(
                &mut tx,
                actor,
                MemberRole::Admin,
                "undo another reviewer's decision",
            )
            .await?;
        }
        self.audit(
            &mut tx,
            actor,
            "review undone",
            &format!("verdict {verdict_id}"),
            serde_json::json!({ "review": review_id, "reviewer": reviewer }),
        )
        .await?;
        self.settle(&mut tx, verdict_id, policy.reviewers_wanted(verdict_id))
            .await?;
        let now = now_millis();
        sqlx::query(&format!("{CLAIM_INSERT}($1, $2, $3, $4){CLAIM_RENEWS}"))
            .bind(verdict_id)
            .bind(reviewer)
            .bind(now)
            .bind(now + policy.claim_millis())
            .execute(&mut *tx)
            .await
            .map_err(|e| self.sql(e))?;
        tx.commit().await.map_err(|e| self.sql(e))?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_hundred_ids_hold_exactly_the_overlap_share_spread_apart() {
        let policy = QueuePolicy {
            overlap_percent: 10,
            claim_seconds: 1800,
        };
        let doubled: Vec<i64> = (1..=100)
            .filter(|id| policy.reviewers_wanted(*id) == 2)
            .collect();
        assert_eq!(doubled.len(), 10);
        assert!(
            doubled.windows(2).all(|w| w[1] - w[0] > 1),
            "consecutive ids are not both doubled: {doubled:?}"
        );
        assert_eq!(QueuePolicy::default().reviewers_wanted(3), 1);
        let all = QueuePolicy {
            overlap_percent: 100,
            ..policy
        };
        assert!((1..200).all(|id| all.reviewers_wanted(id) == 2));
    }

    #[test]
    fn a_verdict_is_refused_once_it_has_the_reviewers_it_wants() {
        let mut holders = Holders::default();
        assert!(holders.admit("rina", 1).is_ok());
        holders.claims.insert("budi".into(), 0);
        assert!(holders.admit("budi", 1).is_ok(), "the claim's holder");
        let taken = holders.admit("rina", 1).unwrap_err();
        assert!(taken.starts_with("claimed by budi until"), "{taken}");
        assert!(holders.admit("rina", 2).is_ok(), "an overlap verdict");
        holders.decided.insert("sari".into());
        assert!(holders.admit("sari", 2).is_ok(), "deciding again");
        let taken = holders.admit("rina", 2).unwrap_err();
        assert!(
            taken.starts_with("decided by sari and claimed by budi"),
            "{taken}"
        );
    }

    #[test]
    fn policies_out_of_range_are_refused() {
        assert!(QueuePolicy::default().validate().is_ok());
        for bad in [
            QueuePolicy {
                overlap_percent: 101,
                claim_seconds: 60,
            },
            QueuePolicy {
                overlap_percent: 10,
                claim_seconds: 0,
            },
            QueuePolicy {
                overlap_percent: 10,
                claim_seconds: QueuePolicy::MAX_CLAIM_SECONDS + 1,
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}
