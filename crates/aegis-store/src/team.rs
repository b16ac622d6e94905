//! Who may do what, and what each did: a team's members with their roles, and the append-only
//! audit log that every decision and change is written to in its own transaction.
//!
//! A history with no members is a console of one, where anyone may do anything (the default, and
//! how every history began). Once a team names its first member, who must be an admin naming
//! themselves, every change is checked against the actor's role.

use serde::{Deserialize, Serialize};

use crate::error::{Result, StoreError};
use crate::open::Store;
use crate::sql::lock_rows;
use crate::time::now_millis;

/// What a member may do; each role may do everything the ones before it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum MemberRole {
    /// Claims, decides and undoes their own decisions.
    Reviewer,
    /// Also edits templates and applies heads.
    Author,
    /// Also sets the queue's policy and retention, deletes history and names members.
    Admin,
}

impl MemberRole {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reviewer => "reviewer",
            Self::Author => "author",
            Self::Admin => "admin",
        }
    }
}

impl std::str::FromStr for MemberRole {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "reviewer" => Ok(Self::Reviewer),
            "author" => Ok(Self::Author),
            "admin" => Ok(Self::Admin),
            other => Err(StoreError::Invalid(format!(
                "unknown role {other:?}: use reviewer, author or admin"
            ))),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Member {
    pub name: String,
    pub role: MemberRole,
    pub added_by: String,
    /// Unix milliseconds.
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub added_at: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct AuditEntry {
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub id: i64,
    /// Unix milliseconds.
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub at: i64,
    pub actor: String,
    /// The database login that wrote the row (PostgreSQL); empty on a SQLite file.
    pub login: String,
    pub action: String,
    pub subject: String,
    /// What changed, as JSON.
    pub detail: String,
}

/// Who someone is to the team, as a change checks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Standing {
    /// The history has no members: a console of one, where anyone may do anything.
    NoTeam,
    Member(MemberRole),
    /// The team has members and this name is not one of them.
    Stranger,
}

impl Standing {
    pub(crate) fn allows(self, needed: MemberRole) -> bool {
        match self {
            Self::NoTeam => true,
            Self::Member(role) => role >= needed,
            Self::Stranger => false,
        }
    }

    /// Refuses `actor` unless this standing allows `needed`; `doing` completes "… may not
    /// {doing}" in the refusal.
    pub(crate) fn require(self, actor: &str, needed: MemberRole, doing: &str) -> Result<()> {
        if self.allows(needed) {
            return Ok(());
        }
        let actor = actor.trim();
        Err(StoreError::Forbidden {
            actor: if actor.is_empty() {
                "a console with no name".into()
            } else {
                actor.to_string()
            },
            held: match self {
                Self::Member(MemberRole::Reviewer) => "a reviewer".into(),
                Self::Member(MemberRole::Author) => "an author".into(),
                Self::Member(MemberRole::Admin) => "an admin".into(),
                Self::NoTeam | Self::Stranger => "not a member of this team".into(),
            },
            doing: doing.to_string(),
            needed: needed.as_str(),
        })
    }
}

impl Store {
    /// The team's members, admins first.
    pub async fn members(&self) -> Result<Vec<Member>> {
        let rows: Vec<(String, String, String, i64)> =
            sqlx::query_as("SELECT name, role, added_by, added_at FROM members ORDER BY name")
                .fetch_all(&self.reader)
                .await
                .map_err(|e| self.sql(e))?;
        let mut members = rows
            .into_iter()
            .map(|(name, role, added_by, added_at)| {
                Ok(Member {
                    name,
                    role: role.parse()?,
                    added_by,
                    added_at,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        members.sort_by(|a, b| b.role.cmp(&a.role).then_with(|| a.name.cmp(&b.name)));
        Ok(members)
    }

    /// Names a member or changes their role. The first member of a team must be an admin naming
    /// themselves; after that only admins may, and the last admin cannot step down.
    pub async fn set_member(&self, actor: &str, name: &str, role: MemberRole) -> Result<Member> {
        let name = member_name(name)?;
        let mut tx = self.begin_deciding().await?;
        let first = self.member_count(&mut tx).await? == 0;
        if first {
            if role != MemberRole::Admin || name != actor.trim() {
                return Err(StoreError::Invalid(format!(
                    "a team starts with an admin naming themselves: run it as {name} with the admin role"
                )));
            }
        } else {
            self.authorize(&mut tx, actor, MemberRole::Admin, "name members")
                .await?;
            if role != MemberRole::Admin {
                self.keep_an_admin(&mut tx, name).await?;
            }
        }
        let now = now_millis();
        sqlx::query(
            "INSERT INTO members (name, role, added_by, added_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT (name) DO UPDATE SET role = excluded.role",
        )
        .bind(name)
        .bind(role.as_str())
        .bind(actor.trim())
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(|e| self.sql(e))?;
        self.audit(
            &mut tx,
            actor,
            "member set",
            &format!("member {name}"),
            serde_json::json!({ "role": role }),
        )
        .await?;
        let member: (String, i64) =
            sqlx::query_as("SELECT added_by, added_at FROM members WHERE name = $1")
                .bind(name)
                .fetch_one(&mut *tx)
                .await
                .map_err(|e| self.sql(e))?;
        tx.commit().await.map_err(|e| self.sql(e))?;
        Ok(Member {
            name: name.to_string(),
            role,
            added_by: member.0,
            added_at: member.1,
        })
    }

    /// Takes a member off the team (admins only; never the last admin). False when they were not
    /// on it.
    pub async fn remove_member(&self, actor: &str, name: &str) -> Result<bool> {
        let name = member_name(name)?;
        let mut tx = self.begin_deciding().await?;
        self.authorize(&mut tx, actor, MemberRole::Admin, "remove members")
            .await?;
        self.keep_an_admin(&mut tx, name).await?;
        let done = sqlx::query("DELETE FROM members WHERE name = $1")
            .bind(name)
            .execute(&mut *tx)
            .await
            .map_err(|e| self.sql(e))?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        self.audit(
            &mut tx,
            actor,
            "member removed",
            &format!("member {name}"),
            serde_json::json!({}),
        )
        .await?;
        tx.commit().await.map_err(|e| self.sql(e))?;
        Ok(true)
    }

    /// The audit log, newest first: up to `limit` entries before `before` (an entry id), by one
    /// actor when named.
    pub async fn audit_log(
        &self,
        actor: Option<&str>,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Vec<AuditEntry>> {
        let rows: Vec<(i64, i64, String, String, String, String, String)> = sqlx::query_as(
            "SELECT id, at, actor, login, action, subject, detail FROM audit_log
             WHERE ($1 = '' OR actor = $1) AND id < $2 ORDER BY id DESC LIMIT $3",
        )
        .bind(actor.map(str::trim).unwrap_or(""))
        .bind(before.unwrap_or(i64::MAX))
        .bind(i64::from(limit.clamp(1, 10_000)))
        .fetch_all(&self.reader)
        .await
        .map_err(|e| self.sql(e))?;
        Ok(rows
            .into_iter()
            .map(
                |(id, at, actor, login, action, subject, detail)| AuditEntry {
                    id,
                    at,
                    actor,
                    login,
                    action,
                    subject,
                    detail,
                },
            )
            .collect())
    }

    /// Refuses `actor` unless their role allows `doing`, for a front end that must check before it
    /// changes files the store does not hold (a head's file is written before its version is
    /// recorded, and the record checks again).
    pub async fn require_role(&self, actor: &str, needed: MemberRole, doing: &str) -> Result<()> {
        let mut tx = self.reader.begin().await.map_err(|e| self.sql(e))?;
        self.authorize(&mut tx, actor, needed, doing).await
    }

    /// Whether `actor`'s examples are trained on as they are added: with no team, anyone's; in a
    /// team, an author's or an admin's. A reviewer's are proposed, for an author to accept.
    pub async fn may_teach(&self, actor: &str) -> Result<bool> {
        let mut tx = self.reader.begin().await.map_err(|e| self.sql(e))?;
        Ok(self
            .standing(&mut tx, actor)
            .await?
            .allows(MemberRole::Author))
    }

    /// Who `actor` is to the team, read inside the change's transaction.
    pub(crate) async fn standing(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        actor: &str,
    ) -> Result<Standing> {
        if self.member_count(tx).await? == 0 {
            return Ok(Standing::NoTeam);
        }
        let role: Option<String> = sqlx::query_scalar("SELECT role FROM members WHERE name = $1")
            .bind(actor.trim())
            .fetch_optional(&mut **tx)
            .await
            .map_err(|e| self.sql(e))?;
        Ok(match role {
            Some(role) => Standing::Member(role.parse()?),
            None => Standing::Stranger,
        })
    }

    /// Refuses `actor` unless the team has no members yet or they hold `needed` or above.
    /// `doing` completes "… may not {doing}" in the refusal.
    pub(crate) async fn authorize(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        actor: &str,
        needed: MemberRole,
        doing: &str,
    ) -> Result<()> {
        self.standing(tx, actor)
            .await?
            .require(actor, needed, doing)
    }

    /// Appends to the audit log inside the change's own transaction, so the entry and the change
    /// are kept or lost together.
    pub(crate) async fn audit(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        actor: &str,
        action: &str,
        subject: &str,
        detail: serde_json::Value,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO audit_log (at, actor, action, subject, detail) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(now_millis())
        .bind(actor.trim())
        .bind(action)
        .bind(subject)
        .bind(detail.to_string())
        .execute(&mut **tx)
        .await
        .map_err(|e| self.sql(e))?;
        Ok(())
    }

    async fn member_count(&self, tx: &mut sqlx::Transaction<'_, sqlx::Any>) -> Result<i64> {
        sqlx::query_scalar("SELECT count(*) FROM members")
            .fetch_one(&mut **tx)
            .await
            .map_err(|e| self.sql(e))
    }

    /// Refuses a change that would leave a team with members but no admin to manage them.
    async fn keep_an_admin(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        leaving: &str,
    ) -> Result<()> {
        // Every admin's row is locked, the leaving one's too: two admins taking each other off
        // at once would otherwise each lock only the other's row, and both succeed.
        let admins: Vec<String> = sqlx::query_scalar(&format!(
            "SELECT name FROM members WHERE role = 'admin'{}",
            lock_rows(self.engine())
        ))
        .fetch_all(&mut **tx)
        .await
        .map_err(|e| self.sql(e))?;
        if admins.iter().all(|admin| admin == leaving) {
            return Err(StoreError::Invalid(format!(
                "{leaving} is the team's last admin: name another admin first"
            )));
        }
        Ok(())
    }
}

/// A reviewer's name as stored: trimmed, and never empty.
pub(crate) fn reviewer_name(reviewer: &str) -> Result<&str> {
    let name = reviewer.trim();
    if name.is_empty() {
        return Err(StoreError::Invalid("a review needs a reviewer name".into()));
    }
    Ok(name)
}

/// A member's name as stored: the same rule as a reviewer's.
fn member_name(name: &str) -> Result<&str> {
    reviewer_name(name).map_err(|_| StoreError::Invalid("a member needs a name".into()))
}
