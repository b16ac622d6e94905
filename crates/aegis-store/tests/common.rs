use std::collections::BTreeMap;

use aegis_guard::{
    Language, ModelRef, ReadingScore, ScoreSource, Status, TemplateVersion, ValidatorResult,
    Verdict, TURN_READING,
};
use aegis_store::{Decision, NewReview, NewVerdict, Source, Store, TemplateContent};

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

/// A store of its own for one test, on the engine the test script asks for
/// (`aegis_scratch_db::POSTGRES_ENV`).
pub struct TempStore {
    pub scratch: aegis_scratch_db::ScratchDatabase,
    pub store: Store,
}

impl TempStore {
    /// The URL another program (sqlx's Any driver) would connect to.
    pub fn url(&self) -> String {
        self.scratch.url()
    }
}

pub async fn temp_store() -> TempStore {
    let scratch = aegis_scratch_db::ScratchDatabase::new().await;
    let store = Store::connect(&scratch.database).await.expect("open");
    TempStore { scratch, store }
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

/// A SQLite history file at `path` with the schema as migrations up to `version` left it, for
/// tests that older rows survive the migrations after it.
pub async fn sqlite_at_version(path: &std::path::Path, version: i64) -> sqlx::SqliteConnection {
    use sqlx::Connection;
    let mut older =
        sqlx::SqliteConnection::connect(&format!("sqlite://{}?mode=rwc", path.display()))
            .await
            .expect("create");
    let mut migrator = sqlx::migrate::Migrator::new(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../migrations/sqlite"
    )))
    .await
    .expect("migrations");
    migrator.migrations = migrator
        .migrations
        .iter()
        .filter(|m| m.version <= version)
        .cloned()
        .collect::<Vec<_>>()
        .into();
    migrator
        .run(&mut older)
        .await
        .unwrap_or_else(|e| panic!("the schema up to {version}: {e}"));
    older
}
