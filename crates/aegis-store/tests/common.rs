use std::collections::BTreeMap;

use aegis_guard::{
    Language, ModelRef, ReadingScore, ScoreSource, Status, TemplateVersion, ValidatorResult,
    Verdict, TURN_READING,
};
use aegis_store::{Database, Decision, NewReview, NewVerdict, Source, Store, TemplateContent};

pub const KEYS: [&str; 4] = ["spam", "toxic", "harassment", "financial_advice"];

pub fn templates() -> Vec<TemplateContent> {
    KEYS.iter()
        .map(|key| TemplateContent {
            key: key.to_string(),
            content_hash: format!("hash-{key}"),
            content: format!("---\nname: {key}\n---\nIs this {key}? {{{{message}}}}\n"),
        })
        .collect()
}

/// A verdict where `failing` validators score 0.9 and the rest 0.1.
pub fn verdict(failing: &[&str]) -> Verdict {
    verdict_scored(KEYS.map(|key| if failing.contains(&key) { 0.9 } else { 0.1 }))
}

/// A verdict with one score per `KEYS` entry, as a head decides it at a threshold of 0.5.
pub fn verdict_scored(scores: [f32; KEYS.len()]) -> Verdict {
    let results: Vec<ValidatorResult> = KEYS
        .iter()
        .zip(scores)
        .map(|(key, score)| ValidatorResult {
            key: key.to_string(),
            name: key.to_string(),
            score,
            prompt_score: Some(0.4),
            learned_score: Some(score),
            readings: vec![ReadingScore {
                reading: TURN_READING.into(),
                score,
                decided: true,
                turned: false,
            }],
            decided_by: ScoreSource::Head,
            head_hash: Some("ab".repeat(32)),
            threshold: 0.5,
            passed: score < 0.5,
            latency_ms: 12.0,
        })
        .collect();
    let failing: Vec<&str> = results
        .iter()
        .filter(|r| !r.passed)
        .map(|r| r.key.as_str())
        .collect();
    Verdict {
        status: if failing.is_empty() {
            Status::Passed
        } else {
            Status::Failed
        },
        case: if failing.is_empty() {
            "aman".into()
        } else {
            failing.join(", ")
        },
        skipped: Vec::new(),
        turn: Default::default(),
        rejection_message: if failing.is_empty() {
            String::new()
        } else {
            "Maaf.".into()
        },
        results,
        language: Language::Indonesian,
        model: ModelRef {
            id: "gemma-3-270m".into(),
            content_hash: "a5fd".into(),
        },
        encoder: None,
        templates: KEYS
            .iter()
            .map(|key| TemplateVersion {
                key: key.to_string(),
                content_hash: format!("hash-{key}"),
            })
            .collect(),
        latency_ms: 50.0,
    }
}

/// The PostgreSQL server the tests run against instead of SQLite files, when set (the test
/// script starts one with `scripts/postgres.sh` and runs this binary once per engine).
pub const POSTGRES_ENV: &str = "AEGIS_TEST_POSTGRES_URL";

/// A store of its own for one test: a SQLite file in a temporary folder, or a new database on
/// the PostgreSQL server [`POSTGRES_ENV`] names.
pub struct TempStore {
    /// Holds the SQLite file (or nothing, on PostgreSQL) until the test ends.
    pub _dir: tempfile::TempDir,
    pub database: Database,
    pub store: Store,
}

impl TempStore {
    /// The URL another program (sqlx's Any driver) would connect to.
    pub fn url(&self) -> String {
        match &self.database {
            Database::Sqlite(path) => format!("sqlite://{}", path.display()),
            Database::Postgres(url) => url.clone(),
        }
    }
}

pub async fn temp_store() -> TempStore {
    let dir = tempfile::tempdir().expect("tempdir");
    let database = match std::env::var(POSTGRES_ENV) {
        Ok(server) if !server.is_empty() => new_postgres_database(&server).await,
        _ => Database::Sqlite(dir.path().join("history.db")),
    };
    let store = Store::connect(&database).await.expect("open");
    TempStore {
        _dir: dir,
        database,
        store,
    }
}

/// A new, empty database on `server` (a URL ending in a database name), so tests running side by
/// side never see each other's rows.
async fn new_postgres_database(server: &str) -> Database {
    use sqlx::Connection;
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    sqlx::any::install_default_drivers();
    let name = format!(
        "aegis_test_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let mut admin = sqlx::AnyConnection::connect(server)
        .await
        .expect("the test PostgreSQL server");
    sqlx::query(&format!("DROP DATABASE IF EXISTS {name}"))
        .execute(&mut admin)
        .await
        .expect("drop a leftover database");
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut admin)
        .await
        .expect("create a test database");
    let (base, _) = server
        .rsplit_once('/')
        .expect("a server URL ends in a database name");
    Database::Postgres(format!("{base}/{name}"))
}

pub async fn record(
    store: &Store,
    text: &str,
    source: Source,
    user: Option<&str>,
    failing: &[&str],
) -> i64 {
    let verdict = verdict(failing);
    let templates = templates();
    store
        .record(&NewVerdict {
            text,
            source,
            user_id: user,
            import: None,
            verdict: &verdict,
            templates: &templates,
        })
        .await
        .expect("record")
}

/// A reviewer agreeing with a verdict overall.
pub fn agree(verdict_id: i64, reviewer: &str) -> NewReview {
    NewReview {
        verdict_id,
        reviewer: reviewer.into(),
        decision: Decision::Agree,
        validators: BTreeMap::new(),
        note: String::new(),
    }
}
