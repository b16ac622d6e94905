//! The console's commands without a window: the real model, a real history (a SQLite file, or a
//! PostgreSQL database when the test script names a server), a scratch copy
//! of the shipped templates, and the HTTP endpoint on a real loopback port.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aegis_app::console::{
    Console, ConsoleConfig, ConsoleEvent, EventSink, LoadStatus, ModelChoice,
};
use aegis_app::error::{ConsoleError, ErrorKind};
use aegis_guard::{ScoreSource, Status};
use aegis_store::{Decision, MemberRole};

#[derive(Default)]
pub struct Recorder(pub Mutex<Vec<ConsoleEvent>>);

impl EventSink for Recorder {
    fn emit(&self, event: ConsoleEvent) {
        self.0.lock().expect("events").push(event);
    }
}

pub struct Fixture {
    pub _dir: tempfile::TempDir,
    /// The history the console opens, named in its settings as a reviewer would name it.
    pub _history: aegis_scratch_db::ScratchDatabase,
    pub prompts: PathBuf,
    pub events: Arc<Recorder>,
    pub console: Arc<Console>,
}

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            copy_dir(&path, &to.join(entry.file_name()));
        } else {
            std::fs::copy(&path, to.join(entry.file_name())).expect("copy");
        }
    }
}

pub async fn start() -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let prompts = dir.path().join("prompts");
    copy_dir(&repo().join("prompt_guard"), &prompts);
    let history = aegis_scratch_db::ScratchDatabase::new().await;
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).expect("mkdir");
    let settings = aegis_app::settings::Settings {
        database: history.arg(),
        ..Default::default()
    };
    settings.save(&data.join("settings.json")).expect("save");
    let events = Arc::new(Recorder::default());
    let console = Console::start(ConsoleConfig {
        data_dir: data,
        prompts_dir: Some(prompts.clone()),
        events: events.clone(),
        model: ModelChoice::Loaded(aegis_engine::testing::default_engine().clone()),
    })
    .await
    .expect("console");
    let state = console.wait_for_model(Duration::from_secs(300)).await;
    assert_eq!(state.status, LoadStatus::Ready, "{state:?}");
    assert!(state.load_ms.is_some());
    Fixture {
        _dir: dir,
        _history: history,
        prompts,
        events,
        console,
    }
}

/// An error as the window receives it.
struct Reported {
    kind: ErrorKind,
    message: String,
    line: Option<u32>,
}

fn kind(error: ConsoleError) -> Reported {
    Reported {
        kind: error.kind(),
        line: error.line(),
        message: error.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
async fn checks_are_decided_by_heads_recorded_and_bad_input_is_refused() {
    let f = start().await;
    let checked = f
        .console
        .check("Dasar goblok, otak udang kamu! Tolol banget.".into())
        .await
        .expect("check");
    let v = &checked.verdict;
    assert_eq!(v.status, Status::Failed);
    assert!(v.case.contains("toxic"), "{}", v.case);
    assert!(v.rejection_message.to_lowercase().contains("maaf"));
    assert!(
        v.results.iter().all(|r| r.decided_by == ScoreSource::Head),
        "the shipped heads decide in the app: {:?}",
        v.results
    );
    let detail = f.console.verdict(checked.verdict_id).await.expect("detail");
    assert_eq!(detail.row.source, "typed");
    assert_eq!(detail.templates.len(), 4);

    let empty = f.console.check("   ".into()).await.expect_err("empty");
    assert_eq!(kind(empty).kind, ErrorKind::Invalid);
    let huge = f
        .console
        .check("a".repeat(70 * 1024))
        .await
        .expect_err("huge");
    let huge = kind(huge);
    assert_eq!(huge.kind, ErrorKind::Invalid);
    assert!(huge.message.contains("64 KiB"), "{}", huge.message);
    let missing = f.console.verdict(999).await.expect_err("missing");
    assert_eq!(kind(missing).kind, ErrorKind::NotFound);
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
async fn an_import_reports_progress_then_a_tally_and_fills_the_review_queue() {
    let f = start().await;
    let csv = repo().join("ui/e2e/fixtures/messages.csv");
    let preview = f.console.preview_file(&csv).expect("preview");
    assert_eq!(preview.suggested_column.as_deref(), Some("text"));
    let summary = f
        .console
        .import("i1".into(), &csv, preview.suggested_column)
        .await
        .expect("import");
    assert!(summary.complete);
    assert_eq!(summary.progress.recorded, 3);
    let progress: Vec<u64> = f
        .events
        .0
        .lock()
        .expect("events")
        .iter()
        .filter_map(|e| match e {
            ConsoleEvent::Import { progress, .. } => Some(progress.rows_done),
            _ => None,
        })
        .collect();
    assert_eq!(progress, vec![0, 1, 2, 3]);
    assert_eq!(summary.tallies.len(), 4);
    let histogram_total: u64 = summary.tallies[0].histogram.iter().sum();
    assert_eq!(histogram_total, 3);

    let bad = f
        .console
        .preview_file(Path::new("/nonexistent/x.xlsx"))
        .expect_err("bad type");
    assert_eq!(kind(bad).kind, ErrorKind::File);

    // Failed imports (toxic, financial advice) wait for review; the decisions stick and undo.
    let queue = f.console.review_queue(50).await.expect("queue");
    assert!(queue.remaining >= 2, "{queue:?}");
    let first = f
        .console
        .review(queue.items[0].verdict_id, Decision::Agree, String::new())
        .await
        .expect("agree");
    f.console
        .review(
            queue.items[1].verdict_id,
            Decision::Overturn,
            "looks fine".into(),
        )
        .await
        .expect("overturn");
    assert_eq!(
        f.console.review_queue(50).await.expect("queue").remaining,
        queue.remaining - 2
    );
    assert!(f.console.undo_review(first).await.expect("undo"));
    assert_eq!(
        f.console.review_queue(50).await.expect("queue").remaining,
        queue.remaining - 1
    );
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
async fn a_saved_template_changes_the_next_verdict_and_a_broken_one_is_refused_at_its_line() {
    let f = start().await;
    let message = "Selamat pagi, bagaimana cara mengganti kata sandi akun saya?";
    let before = f
        .console
        .check(message.into())
        .await
        .expect("check")
        .verdict;
    let spam = before
        .results
        .iter()
        .find(|r| r.key == "spam")
        .expect("spam");
    assert!(spam.passed);
    let path = f.prompts.join("spam.txt");
    let original = std::fs::read_to_string(&path).expect("read");
    let threshold = format!("threshold: {:.6}", (spam.score / 2.0).max(1e-6));
    let edited = original
        .lines()
        .map(|l| {
            if l.starts_with("threshold:") {
                threshold.as_str()
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n";

    // Tried first: the edit flips spam on this message, the saved template does not.
    let tried = f
        .console
        .try_template("spam", &edited, vec![message.into()])
        .await
        .expect("try");
    assert!(tried[0].flipped, "{tried:?}");

    f.console
        .save_template("spam", &edited)
        .await
        .expect("save");
    let after = f
        .console
        .check(message.into())
        .await
        .expect("check")
        .verdict;
    let spam_after = after
        .results
        .iter()
        .find(|r| r.key == "spam")
        .expect("spam");
    assert!(!spam_after.passed, "{spam_after:?}");
    assert_eq!(
        spam_after.decided_by,
        ScoreSource::Head,
        "a threshold edit keeps the head"
    );
    let versions = f.console.template_versions("spam").await.expect("versions");
    assert_eq!(versions.len(), 1);

    let broken = edited.replace(&threshold, "threshold: 7");
    let refused = kind(
        f.console
            .save_template("spam", &broken)
            .await
            .expect_err("broken"),
    );
    assert_eq!(refused.kind, ErrorKind::Template);
    let line = original
        .lines()
        .position(|l| l.starts_with("threshold:"))
        .map(|i| i as u32 + 1);
    assert_eq!(refused.line, line);
    assert_eq!(
        std::fs::read_to_string(&path).expect("read"),
        edited,
        "nothing lost"
    );

    // Broken on disk by another editor: reloaded without it; the others still answer.
    std::fs::write(f.prompts.join("toxic.txt"), "no front matter").expect("write");
    f.console.reload_templates().expect("reload");
    let files = f.console.templates().expect("templates");
    let toxic = files.iter().find(|t| t.key == "toxic").expect("toxic");
    assert_eq!(toxic.problem.as_ref().and_then(|p| p.line), Some(1));
    assert_eq!(toxic.scored_by, "off");
    let rest = f
        .console
        .check(message.into())
        .await
        .expect("check")
        .verdict;
    let keys: Vec<&str> = rest.results.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(keys.len(), 3);
    assert!(!keys.contains(&"toxic"));

    // In a team the console acts as its Settings reviewer: a reviewer's save is refused and
    // leaves the file as it was, and the audit log names who saved what.
    let admin = f.console.settings().reviewer;
    f.console
        .set_member(admin.clone(), MemberRole::Admin)
        .await
        .expect("the first admin names themselves");
    assert!(
        f.console.may_teach().await.expect("may teach"),
        "an admin teaches"
    );
    f.console
        .set_member("budi".into(), MemberRole::Reviewer)
        .await
        .expect("budi");
    let mut settings = f.console.settings();
    settings.reviewer = "budi".into();
    f.console.update_settings(settings).await.expect("settings");
    let forbidden = kind(
        f.console
            .save_template("spam", &original)
            .await
            .expect_err("a reviewer may not save templates"),
    );
    assert_eq!(forbidden.kind, ErrorKind::Forbidden);
    assert!(
        forbidden
            .message
            .contains("budi is a reviewer and may not save templates"),
        "{}",
        forbidden.message
    );
    assert_eq!(std::fs::read_to_string(&path).expect("read"), edited);
    // A reviewer's mark is proposed; accepting it is an author's work.
    assert!(
        !f.console.may_teach().await.expect("may teach"),
        "the Teach view offers a reviewer no accept, relabel or remove"
    );
    let checked = f
        .console
        .check("Klik link ini, hadiah menanti".into())
        .await
        .expect("check");
    let mark = f
        .console
        .mark_verdict(checked.verdict_id, "spam", true)
        .await
        .expect("a reviewer proposes");
    assert!(mark.proposed, "the console says it is a proposal");
    let proposed = mark.example_id;
    let examples = f.console.examples("spam").await.expect("examples");
    let example = examples.iter().find(|e| e.id == proposed).expect("kept");
    assert!(example.pending, "a reviewer's example waits for an author");
    let refused = kind(
        f.console
            .accept_example(proposed)
            .await
            .expect_err("a reviewer may not accept"),
    );
    assert_eq!(refused.kind, ErrorKind::Forbidden);
    let log = f.console.audit_log(None, 10).await.expect("audit log");
    let saves: Vec<(&str, &str)> = log
        .iter()
        .filter(|e| e.action == "template saved")
        .map(|e| (e.actor.as_str(), e.subject.as_str()))
        .collect();
    assert_eq!(saves, [(admin.as_str(), "template spam")]);
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
async fn the_http_endpoint_starts_and_stops_from_settings() {
    let f = start().await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let mut settings = f.console.settings();
    settings.http.enabled = true;
    settings.http.port = port;
    f.console
        .update_settings(settings.clone())
        .await
        .expect("enable");
    let status = f.console.http_status().await;
    assert_eq!(status.address, Some(format!("http://127.0.0.1:{port}")));
    let health: serde_json::Value = reqwest::get(format!("http://127.0.0.1:{port}/health"))
        .await
        .expect("health")
        .json()
        .await
        .expect("json");
    assert_eq!(health["status"], "healthy");
    assert_eq!(health["model"]["state"], "ready");

    let mut public = settings.clone();
    public.http.host = "0.0.0.0".into();
    let refused = kind(
        f.console
            .update_settings(public)
            .await
            .expect_err("no token"),
    );
    assert!(refused.message.contains("token"), "{}", refused.message);

    settings.http.enabled = false;
    f.console.update_settings(settings).await.expect("disable");
    assert!(!f.console.http_status().await.running);
    assert!(reqwest::get(format!("http://127.0.0.1:{port}/health"))
        .await
        .is_err());
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
async fn an_evaluation_is_kept_rethresholded_compared_and_its_threshold_applied() {
    let f = start().await;
    let data = repo().join("ui/e2e/fixtures/labelled.csv");
    let view = f
        .console
        .evaluate("e1".into(), &data, None, None)
        .await
        .expect("evaluate");
    assert_eq!(view.report.rows, 8);
    let progress: Vec<usize> = f
        .events
        .0
        .lock()
        .expect("events")
        .iter()
        .filter_map(|e| match e {
            ConsoleEvent::Eval { done, .. } => Some(*done),
            _ => None,
        })
        .collect();
    assert_eq!(
        progress,
        (0..=8).collect::<Vec<_>>(),
        "a progress event per row"
    );
    let toxic = view.report.validator("toxic").expect("toxic");
    assert_eq!(toxic.scored_by, "head");
    assert_eq!(toxic.overall.labelled, 6);
    let points = view
        .points
        .iter()
        .find(|p| p.key == "toxic")
        .expect("points");
    assert_eq!(points.scores.len(), 6);

    // The same run at another threshold: stored scores only, and the same as the report says.
    let strict = f
        .console
        .eval_view(view.run_id, &[("toxic".to_string(), 0.99)].into())
        .await
        .expect("view");
    let flagged = points.scores.iter().filter(|&&s| s >= 0.99).count();
    let c = strict
        .report
        .validator("toxic")
        .expect("toxic")
        .overall
        .confusion;
    assert_eq!(c.true_positives + c.false_positives, flagged);

    // A second run of the same data compares with the first: same templates, nothing flips.
    let again = f
        .console
        .evaluate("e2".into(), &data, None, None)
        .await
        .expect("evaluate again");
    let comparison = f
        .console
        .compare_runs(view.run_id, again.run_id)
        .await
        .expect("compare");
    assert!(comparison.flips.is_empty(), "{:?}", comparison.flips);
    assert_eq!(f.console.eval_runs().await.expect("runs").len(), 2);

    // Apply: only the front matter's threshold changes, as a new version; the head still binds.
    let before = std::fs::read_to_string(f.prompts.join("toxic.txt")).expect("template");
    f.console
        .apply_threshold("toxic", 0.35)
        .await
        .expect("apply");
    let after = std::fs::read_to_string(f.prompts.join("toxic.txt")).expect("template");
    assert!(after.contains("\nthreshold: 0.35\n"), "{after}");
    assert_eq!(after.lines().count(), before.lines().count());
    assert_eq!(
        f.console
            .template_versions("toxic")
            .await
            .expect("versions")
            .len(),
        1
    );
    let checked = f.console.check("Dasar goblok".into()).await.expect("check");
    let toxic = checked
        .verdict
        .results
        .iter()
        .find(|r| r.key == "toxic")
        .expect("toxic");
    assert_eq!(toxic.threshold, 0.35);
    assert_eq!(toxic.decided_by, ScoreSource::Head);

    let bad = f
        .console
        .apply_threshold("toxic", 1.5)
        .await
        .expect_err("out of range");
    assert_eq!(kind(bad).kind, ErrorKind::Template);
    let missing = f
        .console
        .evaluate("e3".into(), Path::new("/no/such.jsonl"), None, None)
        .await
        .expect_err("missing file");
    assert_eq!(kind(missing).kind, ErrorKind::File);
    let seed_only = f
        .console
        .evaluate("e4".into(), &data, None, Some(3))
        .await
        .expect_err("seed without limit");
    assert_eq!(kind(seed_only).kind, ErrorKind::Invalid);
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
async fn a_model_server_in_settings_runs_the_guard_and_its_prompts_decide() {
    let llama = tokio::task::spawn_blocking(aegis_remote::testing::LlamaServer::start)
        .await
        .expect("join");
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).expect("mkdir");
    // Heads on the decoder: a server returns no hidden states, so the prompts decide there and
    // a server that goes away is felt (heads on the default encoder would decide here without it).
    let settings = aegis_app::settings::Settings {
        backend: llama.url.clone(),
        encoder: "decoder".into(),
        ..Default::default()
    };
    settings.save(&data.join("settings.json")).expect("save");
    let prompts = dir.path().join("prompts");
    copy_dir(&repo().join("prompt_guard"), &prompts);
    let console = Console::start(ConsoleConfig {
        data_dir: data,
        prompts_dir: Some(prompts),
        events: Arc::new(Recorder::default()),
        model: ModelChoice::Settings,
    })
    .await
    .expect("console");
    let state = console.wait_for_model(Duration::from_secs(120)).await;
    assert_eq!(state.status, LoadStatus::Ready, "{state:?}");
    assert_eq!(state.device, "remote", "{state:?}");

    let checked = console.check("makasih kak".into()).await.expect("check");
    assert!(
        checked
            .verdict
            .results
            .iter()
            .all(|r| r.decided_by == ScoreSource::Prompt),
        "no hidden states come back from a server: {:?}",
        checked.verdict.results
    );
    assert_eq!(
        checked.verdict.model.content_hash, llama.url,
        "the server is recorded"
    );
    assert!(console.verdict(checked.verdict_id).await.is_ok());

    drop(llama);
    let down = kind(console.check("halo".into()).await.expect_err("down"));
    assert_eq!(down.kind, ErrorKind::Unavailable, "{}", down.message);
}
