//! `aegis history`: list, search, show, export, review and delete recorded verdicts.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use aegis_guard::Status;
use aegis_store::{
    format_millis, parse_day, Cursor, Database, Decision, ExportFormat, HistoryFilter, HistoryRow,
    NewReview, ScoreRange, Source, Store,
};
use anyhow::{bail, Context, Result};

use crate::ExitStatus;

#[derive(Debug, Clone, clap::Args)]
pub struct DbArgs {
    /// History database: a SQLite file's path, or a postgres:// URL a team shares (default: the
    /// platform data folder's file, e.g. ~/.local/share/aegis/history.db; AEGIS_DB names a file
    /// too).
    #[arg(
        long = "database",
        visible_alias = "db",
        env = "AEGIS_DATABASE_URL",
        global = true
    )]
    pub database: Option<String>,
    /// Who is acting: the name the team's roles check and the audit log records, and the
    /// reviewer whose claims and decisions these are (default: $USER).
    #[arg(
        long = "as",
        visible_alias = "reviewer",
        value_name = "NAME",
        env = "AEGIS_MEMBER",
        global = true
    )]
    pub member: Option<String>,
}

impl DbArgs {
    /// The name this command acts as.
    pub fn actor(&self) -> String {
        self.member
            .clone()
            .or_else(|| std::env::var("USER").ok())
            .filter(|name| !name.trim().is_empty())
            .unwrap_or_else(|| "reviewer".into())
    }

    pub fn database(&self) -> Result<Database> {
        let given = self
            .database
            .clone()
            .or_else(|| std::env::var("AEGIS_DB").ok().filter(|s| !s.is_empty()));
        match given {
            Some(given) => Ok(given.parse()?),
            None => Ok(Database::Sqlite(
                dirs::data_dir()
                    .unwrap_or_else(|| PathBuf::from("."))
                    .join("aegis/history.db"),
            )),
        }
    }

    pub async fn open(&self) -> Result<Store> {
        Ok(Store::connect(&self.database()?).await?)
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct FilterArgs {
    /// passed or failed.
    #[arg(long)]
    pub status: Option<String>,
    /// Only verdicts where this validator failed.
    #[arg(long)]
    pub failed: Option<String>,
    /// Validator whose score --min-score/--max-score bound (default: any validator).
    #[arg(long)]
    pub validator: Option<String>,
    #[arg(long)]
    pub min_score: Option<f64>,
    #[arg(long)]
    pub max_score: Option<f64>,
    /// typed, import, http or cli.
    #[arg(long)]
    pub source: Option<String>,
    #[arg(long)]
    pub user: Option<String>,
    /// First day included, YYYY-MM-DD (UTC).
    #[arg(long)]
    pub since: Option<String>,
    /// Last day included, YYYY-MM-DD (UTC).
    #[arg(long)]
    pub until: Option<String>,
    #[arg(long, conflicts_with = "unreviewed")]
    pub reviewed: bool,
    #[arg(long)]
    pub unreviewed: bool,
    /// Words the message must contain.
    #[arg(long)]
    pub search: Option<String>,
}

impl FilterArgs {
    pub fn filter(&self) -> Result<HistoryFilter> {
        let status = match self.status.as_deref() {
            None => None,
            Some("passed") => Some(Status::Passed),
            Some("failed") => Some(Status::Failed),
            Some(other) => bail!("unknown status {other:?}: use passed or failed"),
        };
        let score = (self.min_score.is_some() || self.max_score.is_some()).then(|| ScoreRange {
            validator: self.validator.clone(),
            min: self.min_score,
            max: self.max_score,
        });
        Ok(HistoryFilter {
            status,
            failed_validator: self.failed.clone(),
            score,
            source: self
                .source
                .as_deref()
                .map(str::parse::<Source>)
                .transpose()?,
            user_id: self.user.clone(),
            since: self.since.as_deref().map(parse_day).transpose()?,
            until: self
                .until
                .as_deref()
                .map(|d| parse_day(d).map(|start| start + 86_400_000))
                .transpose()?,
            reviewed: match (self.reviewed, self.unreviewed) {
                (true, _) => Some(true),
                (_, true) => Some(false),
                _ => None,
            },
            text: self.search.clone(),
        })
    }
}

#[derive(Debug, clap::Args)]
pub struct HistoryArgs {
    #[command(subcommand)]
    pub command: HistoryCommand,
    #[command(flatten)]
    pub db: DbArgs,
}

#[derive(Debug, clap::Subcommand)]
pub enum HistoryCommand {
    /// Newest verdicts first, filtered.
    List {
        #[command(flatten)]
        filter: FilterArgs,
        #[arg(long, default_value_t = 20)]
        limit: u32,
        /// Continue after this cursor (printed at the end of the previous page).
        #[arg(long)]
        after: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// One verdict with its results, templates and reviews.
    Show {
        id: i64,
        #[arg(long)]
        json: bool,
    },
    /// Write the filtered history as CSV or JSONL.
    Export {
        #[command(flatten)]
        filter: FilterArgs,
        #[arg(long, default_value = "jsonl")]
        format: String,
        /// Write reviewed verdicts as a labelled set in the evaluation schema (needs --reviewed):
        /// a reviewer's agreement keeps the guard's result as the label, an overturn flips it.
        #[arg(long, requires = "reviewed", conflicts_with = "format")]
        as_eval: bool,
        /// File to write (default: standard output).
        #[arg(long, short)]
        out: Option<PathBuf>,
    },
    /// Checked and failed counts per validator per day.
    Stats {
        #[command(flatten)]
        filter: FilterArgs,
        #[arg(long)]
        json: bool,
    },
    /// Record a reviewer's decision on a verdict.
    Review {
        id: i64,
        #[arg(
            long,
            required_unless_present = "overturn",
            conflicts_with = "overturn"
        )]
        agree: bool,
        #[arg(long)]
        overturn: bool,
        /// Per-validator decision, e.g. --validator toxic=overturn (repeatable).
        #[arg(long = "validator", value_name = "KEY=DECISION")]
        validators: Vec<String>,
        #[arg(long, default_value = "")]
        note: String,
    },
    /// Claim a batch of the team's review queue for a reviewer, the most uncertain first: no one
    /// else is handed these verdicts until the claims expire or are released.
    Claim {
        #[arg(long, default_value_t = 25)]
        limit: u32,
        /// Passed verdicts this close to a threshold join the queue too.
        #[arg(long, default_value_t = 0.15)]
        margin: f64,
        #[arg(long)]
        json: bool,
    },
    /// Give a reviewer's undecided claims back to the team.
    Release,
    /// Show the team's queue rules, or change them.
    Queue {
        /// Percent of queued verdicts two reviewers decide apart, to measure their agreement.
        #[arg(long)]
        overlap: Option<u32>,
        /// How long a claim lasts undecided before the queue hands it to someone else.
        #[arg(long)]
        claim_minutes: Option<u32>,
    },
    /// Cohen's kappa between reviewers, per validator and per pair, on verdicts two decided.
    Agreement {
        #[arg(long)]
        json: bool,
    },
    /// Delete one verdict, or every verdict matching filters with --matching.
    Delete {
        id: Option<i64>,
        #[arg(long, conflicts_with = "id")]
        matching: bool,
        #[command(flatten)]
        filter: FilterArgs,
    },
    /// Keep verdicts for DAYS days ("off" keeps them forever); applied now and at every open.
    Retention { days: String },
}

pub fn run(args: HistoryArgs) -> Result<ExitStatus> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(run_async(args))
}

async fn run_async(args: HistoryArgs) -> Result<ExitStatus> {
    let store = args.db.open().await?;
    let actor = args.db.actor();
    match args.command {
        HistoryCommand::List {
            filter,
            limit,
            after,
            json,
        } => {
            let after = after.as_deref().map(str::parse::<Cursor>).transpose()?;
            let page = store.list(&filter.filter()?, after, limit).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&page)?);
            } else {
                println!(
                    "{:>7}  {:<24}  {:<6}  {:<7}  {:<24}  text",
                    "id", "time", "source", "status", "case"
                );
                for row in &page.rows {
                    print_row(row);
                }
                if let Some(next) = page.next {
                    println!("more: --after {next}");
                }
            }
        }
        HistoryCommand::Show { id, json } => {
            let Some(detail) = store.get(id).await? else {
                bail!("no verdict {id} in {}", store.database());
            };
            if json {
                println!("{}", serde_json::to_string_pretty(&detail)?);
            } else {
                let row = &detail.row;
                println!(
                    "verdict {} at {}",
                    row.verdict_id,
                    format_millis(row.created_at)
                );
                if row.context_cut > 0 {
                    println!("({} older turns cut to fit the context)", row.context_cut);
                }
                for turn in &row.context {
                    println!("  {}: {}", turn.role.as_str(), turn.content);
                }
                if row.turn_index > 0 || !row.context.is_empty() {
                    println!("turn {} ({}):", row.turn_index, row.role.as_str());
                }
                println!("text: {}", row.text);
                println!(
                    "source: {}  user: {}  language: {}",
                    row.source,
                    row.user_id.as_deref().unwrap_or("-"),
                    row.language
                );
                println!("status: {} ({})", row.status, row.case);
                if !row.rejection_message.is_empty() {
                    println!("message: {}", row.rejection_message);
                }
                println!(
                    "model: {} (sha256 {})",
                    row.model_id,
                    short(&row.model_hash)
                );
                for r in &row.results {
                    println!(
                        "  {:<18} {:.3} (prompt {}, learned {}) by {:<6} threshold {:.2} {}  template {}{}",
                        r.key,
                        r.score,
                        r.prompt_score.map_or("-".into(), |s| format!("{s:.3}")),
                        r.learned_score.map_or("-".into(), |s| format!("{s:.3}")),
                        r.decided_by,
                        r.threshold,
                        if r.passed { "passed" } else { "FAILED" },
                        short(&r.template_hash),
                        r.head_hash
                            .as_deref()
                            .map_or(String::new(), |h| format!("  head {}", short(h)))
                    );
                }
                for review in &detail.reviews {
                    println!(
                        "review by {} at {}: {} {:?} {}",
                        review.reviewer,
                        format_millis(review.created_at),
                        review.decision.as_str(),
                        review.validators,
                        review.note
                    );
                }
            }
        }
        HistoryCommand::Export {
            filter,
            as_eval: true,
            out,
            ..
        } => {
            let filter = filter.filter()?;
            let examples = store.reviewed_examples(&filter).await?;
            let mut lines = String::new();
            let mut skipped = 0;
            for example in examples {
                // A row must label something; an overturned pass says only "something was missed".
                if example.labels.values().all(Option::is_none) {
                    skipped += 1;
                    continue;
                }
                lines.push_str(&serde_json::to_string(&example.into_labelled())?);
                lines.push('\n');
            }
            write_out(out.as_deref(), lines.as_bytes())?;
            eprintln!(
                "exported {} reviewed messages as labelled data ({skipped} reviews named no validator and were left out)",
                lines.lines().count()
            );
        }
        HistoryCommand::Export {
            filter,
            format,
            as_eval: false,
            out,
        } => {
            let format: ExportFormat = format.parse()?;
            let filter = filter.filter()?;
            let written = match out {
                Some(path) => {
                    let mut buffer = Vec::new();
                    let written = store.export(&filter, format, &mut buffer).await?;
                    aegis_files::write_atomically(&path, &buffer)?;
                    written
                }
                None => {
                    let mut out = std::io::BufWriter::new(std::io::stdout());
                    store.export(&filter, format, &mut out).await?
                }
            };
            eprintln!("exported {written} verdicts");
        }
        HistoryCommand::Stats { filter, json } => {
            let counts = store.daily_counts(&filter.filter()?).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&counts)?);
            } else {
                println!(
                    "{:<10}  {:<18} {:>8} {:>8}",
                    "day", "validator", "checked", "failed"
                );
                for c in counts {
                    println!(
                        "{:<10}  {:<18} {:>8} {:>8}",
                        c.day, c.validator, c.checked, c.failed
                    );
                }
            }
        }
        HistoryCommand::Review {
            id,
            agree: _,
            overturn,
            validators,
            note,
        } => {
            let validators = validators
                .iter()
                .map(|pair| {
                    let (key, decision) = pair.split_once('=').with_context(|| {
                        format!("{pair:?} is not KEY=DECISION, e.g. toxic=overturn")
                    })?;
                    Ok((key.to_string(), decision.parse::<Decision>()?))
                })
                .collect::<Result<BTreeMap<_, _>>>()?;
            let review_id = store
                .add_review(&NewReview {
                    verdict_id: id,
                    reviewer: actor.clone(),
                    decision: if overturn {
                        Decision::Overturn
                    } else {
                        Decision::Agree
                    },
                    validators,
                    note,
                })
                .await?;
            println!("review {review_id} recorded on verdict {id}");
        }
        HistoryCommand::Claim {
            limit,
            margin,
            json,
        } => {
            let batch = store.claim_reviews(&actor, margin, limit).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&batch)?);
            } else {
                for row in &batch.items {
                    print_row(row);
                }
                println!(
                    "{} claimed for {} until {}; {} waiting in all",
                    batch.items.len(),
                    actor.trim(),
                    format_millis(batch.claimed_until),
                    batch.remaining
                );
            }
        }
        HistoryCommand::Release => {
            let released = store.release_claims(&actor).await?;
            println!("{released} claims given back");
        }
        HistoryCommand::Queue {
            overlap,
            claim_minutes,
        } => {
            let mut policy = store.queue_policy().await?;
            if overlap.is_some() || claim_minutes.is_some() {
                if let Some(percent) = overlap {
                    policy.overlap_percent = percent;
                }
                if let Some(minutes) = claim_minutes {
                    policy.claim_seconds = minutes.saturating_mul(60);
                }
                store.set_queue_policy(&actor, &policy).await?;
            }
            println!(
                "overlap {}% (decided by two reviewers); claims last {} minutes",
                policy.overlap_percent,
                policy.claim_seconds / 60
            );
        }
        HistoryCommand::Agreement { json } => {
            let agreement = store.reviewer_agreement().await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&agreement)?);
            } else {
                println!(
                    "{} messages decided by two or more reviewers",
                    agreement.messages
                );
                let kappa = |k: &aegis_store::Kappa| {
                    format!(
                        "kappa {}  ({}/{} agreed)",
                        k.kappa.map_or("-".into(), |x| format!("{x:.2}")),
                        k.agreed,
                        k.compared
                    )
                };
                for v in &agreement.validators {
                    println!("  {:<24} {}", v.validator, kappa(&v.agreement));
                }
                for p in &agreement.pairs {
                    println!(
                        "  {:<24} {}",
                        format!("{} · {}", p.first, p.second),
                        kappa(&p.agreement)
                    );
                }
            }
        }
        HistoryCommand::Delete {
            id,
            matching,
            filter,
        } => match (id, matching) {
            (Some(id), _) => {
                if !store.delete(&actor, id).await? {
                    bail!("no verdict {id} in {}", store.database());
                }
                println!("deleted verdict {id}");
            }
            (None, true) => {
                let deleted = store.delete_matching(&actor, &filter.filter()?).await?;
                println!("deleted {deleted} verdicts");
            }
            (None, false) => bail!("give a verdict id, or --matching with filters"),
        },
        HistoryCommand::Retention { days } => {
            let days = match days.as_str() {
                "off" => None,
                n => Some(
                    n.parse::<u32>()
                        .with_context(|| format!("{n:?} is not a number of days (or \"off\")"))?,
                ),
            };
            let dropped = store.set_retention_days(&actor, days).await?;
            match days {
                Some(d) => {
                    println!("keeping {d} days of history; dropped {dropped} older verdicts")
                }
                None => println!("keeping history forever"),
            }
        }
    }
    std::io::stdout().flush()?;
    store.close().await;
    Ok(ExitStatus::Passed)
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

fn print_row(row: &HistoryRow) {
    let text: String = row
        .text
        .chars()
        .take(60)
        .collect::<String>()
        .replace('\n', " ");
    println!(
        "{:>7}  {:<24}  {:<6}  {:<7}  {:<24}  {}",
        row.verdict_id,
        format_millis(row.created_at),
        row.source,
        row.status,
        row.case,
        text
    );
}

/// Writes `bytes` to `path`, or to standard output without one.
fn write_out(path: Option<&std::path::Path>, bytes: &[u8]) -> Result<()> {
    match path {
        Some(path) => Ok(aegis_files::write_atomically(path, bytes)?),
        None => Ok(std::io::stdout().write_all(bytes)?),
    }
}

pub(crate) fn with_store<T, F, Fut>(db: &DbArgs, work: F) -> Result<T>
where
    F: FnOnce(std::sync::Arc<Store>) -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let store = std::sync::Arc::new(db.open().await?);
        let result = work(store.clone()).await;
        if let Ok(store) = std::sync::Arc::try_unwrap(store) {
            store.close().await;
        }
        result
    })
}
