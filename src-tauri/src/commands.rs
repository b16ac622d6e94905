//! The window's commands: each one unwraps its arguments, calls the console, and turns errors
//! into `{kind, message, line}`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use aegis_eval::Comparison;
use aegis_guard::{Turn, TurnsChecked};
use aegis_import::ImportSummary;
use aegis_store::{
    AuditEntry, Decision, EvalRunSummary, ExampleOrigin, HeadVersion, HistoryPage, Member,
    MemberRole, QueuePolicy, ReviewQueue, ReviewerAgreement, StoredExample, TemplateSave,
    VerdictDetail,
};
use tauri::State;

use crate::error::CommandError;
use aegis_app::console::{
    AppInfo, CheckResult, Console, Exported, FilePreview, HistoryQuery, ModelState, TryRow,
};
use aegis_app::evaluation::EvalView;
use aegis_app::http::HttpStatus;
use aegis_app::playground::PlaygroundRequest;
use aegis_app::settings::Settings;
use aegis_app::teach::{AppliedHead, NewValidator, Suggestion, TeachValidator, TrainReport};
use aegis_app::templates::TemplateFile;

type Console_<'a> = State<'a, Arc<Console>>;
type Answer<T> = Result<T, CommandError>;

#[tauri::command]
pub fn app_info(console: Console_<'_>) -> AppInfo {
    console.app_info()
}

#[tauri::command]
pub fn model_state(console: Console_<'_>) -> ModelState {
    console.model_state()
}

#[tauri::command]
pub async fn check(console: Console_<'_>, text: String) -> Answer<CheckResult> {
    Ok(console.check(text).await?)
}

/// Checks a conversation typed on the Check screen: its last turn, or every turn, each in the
/// context of the turns before it.
#[tauri::command]
pub async fn check_conversation(
    console: Console_<'_>,
    turns: Vec<Turn>,
    checked: TurnsChecked,
) -> Answer<Vec<CheckResult>> {
    Ok(console.check_conversation(turns, checked).await?)
}

/// Talks to the chat upstream through the guard; the answer's steps come as `playground`
/// events, and this returns when it has ended.
#[tauri::command]
pub async fn playground_send(
    console: Console_<'_>,
    playground_id: String,
    request: PlaygroundRequest,
) -> Answer<()> {
    Ok(console.playground_send(playground_id, request).await?)
}

#[tauri::command]
pub fn preview_file(console: Console_<'_>, path: PathBuf) -> Answer<FilePreview> {
    Ok(console.preview_file(&path)?)
}

#[tauri::command]
pub async fn import_file(
    console: Console_<'_>,
    import_id: String,
    path: PathBuf,
    column: Option<String>,
) -> Answer<ImportSummary> {
    Ok(console.import(import_id, &path, column).await?)
}

/// Stops a running import, evaluation or training by the id it was started with.
#[tauri::command]
pub fn cancel_run(console: Console_<'_>, run_id: String) -> bool {
    console.cancel(&run_id)
}

/// Claims up to `limit` verdicts of the team's queue for this reviewer, the most uncertain
/// first; no one else is handed them until the claims expire or are released.
#[tauri::command]
pub async fn review_queue(console: Console_<'_>, limit: u32) -> Answer<ReviewQueue> {
    Ok(console.review_queue(limit).await?)
}

/// Gives this reviewer's undecided claims back to the team.
#[tauri::command]
pub async fn release_reviews(console: Console_<'_>) -> Answer<u64> {
    Ok(console.release_reviews().await?)
}

/// The team's queue rules: the overlap share and how long a claim lasts.
#[tauri::command]
pub async fn queue_policy(console: Console_<'_>) -> Answer<QueuePolicy> {
    Ok(console.queue_policy().await?)
}

#[tauri::command]
pub async fn set_queue_policy(console: Console_<'_>, policy: QueuePolicy) -> Answer<()> {
    Ok(console.set_queue_policy(policy).await?)
}

/// The team's members and their roles.
#[tauri::command]
pub async fn members(console: Console_<'_>) -> Answer<Vec<Member>> {
    Ok(console.members().await?)
}

/// Names a member or changes their role (admins; the first member is an admin naming
/// themselves).
#[tauri::command]
pub async fn set_member(console: Console_<'_>, name: String, role: MemberRole) -> Answer<Member> {
    Ok(console.set_member(name, role).await?)
}

#[tauri::command]
pub async fn remove_member(console: Console_<'_>, name: String) -> Answer<bool> {
    Ok(console.remove_member(name).await?)
}

/// Who decided and changed what, newest first.
#[tauri::command]
pub async fn audit_log(
    console: Console_<'_>,
    before: Option<i64>,
    limit: u32,
) -> Answer<Vec<AuditEntry>> {
    Ok(console.audit_log(before, limit).await?)
}

/// Cohen's kappa between reviewers on the verdicts two of them decided.
#[tauri::command]
pub async fn reviewer_agreement(console: Console_<'_>) -> Answer<ReviewerAgreement> {
    Ok(console.reviewer_agreement().await?)
}

#[tauri::command]
pub async fn review(
    console: Console_<'_>,
    verdict_id: i64,
    decision: Decision,
    note: String,
) -> Answer<i64> {
    Ok(console.review(verdict_id, decision, note).await?)
}

#[tauri::command]
pub async fn undo_review(console: Console_<'_>, review_id: i64) -> Answer<bool> {
    Ok(console.undo_review(review_id).await?)
}

#[tauri::command]
pub async fn history(
    console: Console_<'_>,
    query: HistoryQuery,
    after: Option<String>,
    limit: u32,
) -> Answer<HistoryPage> {
    let after = after
        .map(|c| c.parse())
        .transpose()
        .map_err(|e: aegis_store::StoreError| aegis_app::error::ConsoleError::from(e))?;
    Ok(console.history(&query, after, limit).await?)
}

#[tauri::command]
pub async fn history_count(console: Console_<'_>, query: HistoryQuery) -> Answer<i64> {
    Ok(console.history_count(&query).await?)
}

#[tauri::command]
pub async fn verdict(console: Console_<'_>, verdict_id: i64) -> Answer<VerdictDetail> {
    Ok(console.verdict(verdict_id).await?)
}

/// Exports to a file the user chose in the native save dialog, opened here rather than by the
/// window: a page could name any path (`~/.bashrc`), a dialog only returns what the user picked.
/// `None` when the dialog was cancelled.
#[tauri::command]
pub async fn export_history(
    app: tauri::AppHandle,
    console: Console_<'_>,
    query: HistoryQuery,
) -> Answer<Option<Exported>> {
    use tauri_plugin_dialog::DialogExt;
    let dialog = app
        .dialog()
        .file()
        .set_file_name("aegis-history.csv")
        .add_filter("CSV", &["csv"])
        .add_filter("JSON Lines", &["jsonl"]);
    let picked = tauri::async_runtime::spawn_blocking(move || dialog.blocking_save_file())
        .await
        .ok()
        .flatten();
    let Some(path) = picked else {
        return Ok(None);
    };
    let path = path.into_path().map_err(|e| {
        aegis_app::error::ConsoleError::Invalid(format!("cannot export there: {e}"))
    })?;
    let count = console.export(&query, &path).await?;
    Ok(Some(Exported {
        count,
        path: path.display().to_string(),
    }))
}

#[tauri::command]
pub fn templates(console: Console_<'_>) -> Answer<Vec<TemplateFile>> {
    Ok(console.templates()?)
}

#[tauri::command]
pub async fn save_template(
    console: Console_<'_>,
    key: String,
    content: String,
) -> Answer<TemplateSave> {
    Ok(console.save_template(&key, &content).await?)
}

#[tauri::command]
pub async fn template_versions(console: Console_<'_>, key: String) -> Answer<Vec<TemplateSave>> {
    Ok(console.template_versions(&key).await?)
}

#[tauri::command]
pub async fn try_template(
    console: Console_<'_>,
    key: String,
    content: String,
    messages: Vec<String>,
) -> Answer<Vec<TryRow>> {
    Ok(console.try_template(&key, &content, messages).await?)
}

#[tauri::command]
pub fn settings(console: Console_<'_>) -> Settings {
    console.settings()
}

#[tauri::command]
pub async fn update_settings(console: Console_<'_>, settings: Settings) -> Answer<Settings> {
    Ok(console.inner().update_settings(settings).await?)
}

#[tauri::command]
pub async fn http_status(console: Console_<'_>) -> Answer<HttpStatus> {
    Ok(console.http_status().await)
}

#[tauri::command]
pub async fn evaluate(
    console: Console_<'_>,
    eval_id: String,
    path: PathBuf,
    limit: Option<usize>,
    seed: Option<u64>,
) -> Answer<EvalView> {
    Ok(console.evaluate(eval_id, &path, limit, seed).await?)
}

#[tauri::command]
pub async fn eval_runs(console: Console_<'_>) -> Answer<Vec<EvalRunSummary>> {
    Ok(console.eval_runs().await?)
}

#[tauri::command]
pub async fn eval_run(
    console: Console_<'_>,
    run_id: i64,
    thresholds: BTreeMap<String, f64>,
) -> Answer<EvalView> {
    Ok(console.eval_view(run_id, &thresholds).await?)
}

#[tauri::command]
pub async fn compare_runs(
    console: Console_<'_>,
    baseline: i64,
    candidate: i64,
) -> Answer<Comparison> {
    Ok(console.compare_runs(baseline, candidate).await?)
}

#[tauri::command]
pub async fn delete_eval_run(console: Console_<'_>, run_id: i64) -> Answer<bool> {
    Ok(console.delete_eval_run(run_id).await?)
}

#[tauri::command]
pub async fn apply_threshold(
    console: Console_<'_>,
    key: String,
    threshold: f64,
) -> Answer<TemplateSave> {
    Ok(console.apply_threshold(&key, threshold).await?)
}

#[tauri::command]
pub async fn teach_validators(console: Console_<'_>) -> Answer<Vec<TeachValidator>> {
    Ok(console.teach_validators().await?)
}

#[tauri::command]
pub async fn examples(console: Console_<'_>, validator: String) -> Answer<Vec<StoredExample>> {
    Ok(console.examples(&validator).await?)
}

#[tauri::command]
pub async fn add_example(
    console: Console_<'_>,
    validator: String,
    text: String,
    violates: bool,
) -> Answer<i64> {
    Ok(console
        .add_example(&validator, &text, violates, ExampleOrigin::Manual, None)
        .await?)
}

/// A label on a message the labelling queue suggested: an example like any other, except that
/// the default line is drawn on the author's other examples (suggestions are chosen hard).
#[tauri::command]
pub async fn label_suggestion(
    console: Console_<'_>,
    validator: String,
    text: String,
    violates: bool,
) -> Answer<i64> {
    Ok(console
        .add_example(&validator, &text, violates, ExampleOrigin::Suggestion, None)
        .await?)
}

#[tauri::command]
pub async fn mark_verdict(
    console: Console_<'_>,
    verdict_id: i64,
    validator: String,
    violates: bool,
) -> Answer<aegis_app::examples::Marked> {
    Ok(console
        .mark_verdict(verdict_id, &validator, violates)
        .await?)
}

#[tauri::command]
pub async fn relabel_example(console: Console_<'_>, id: i64, violates: bool) -> Answer<i64> {
    Ok(console.relabel_example(id, violates).await?)
}

#[tauri::command]
pub async fn remove_example(console: Console_<'_>, id: i64) -> Answer<bool> {
    Ok(console.remove_example(id).await?)
}

/// Whether this console's member teaches at once (no team, an author, an admin); a reviewer's
/// examples are proposals, and accepting, relabelling and removing are an author's (a reviewer
/// may only withdraw a proposal of their own).
#[tauri::command]
pub async fn may_teach(console: Console_<'_>) -> Answer<bool> {
    Ok(console.may_teach().await?)
}

#[tauri::command]
pub async fn accept_example(console: Console_<'_>, id: i64) -> Answer<bool> {
    Ok(console.accept_example(id).await?)
}

#[tauri::command]
pub async fn create_validator(console: Console_<'_>, validator: NewValidator) -> Answer<String> {
    Ok(console.create_validator(validator).await?)
}

/// Trains a validator's head without applying it; progress arrives as `train` events, and
/// `cancel_run(train_id)` stops it.
#[tauri::command]
pub async fn train_head(
    console: Console_<'_>,
    train_id: String,
    validator: String,
) -> Answer<TrainReport> {
    Ok(console.train(train_id, validator).await?)
}

/// The messages to label next for a validator, from history, the benign pool and `files`.
#[tauri::command]
pub async fn suggest_examples(
    console: Console_<'_>,
    validator: String,
    files: Vec<PathBuf>,
    wanted: usize,
) -> Answer<Vec<Suggestion>> {
    Ok(console.suggest_examples(validator, files, wanted).await?)
}

/// Moves the line of the head waiting to be applied to the place the author chose on its
/// trade-off curve.
#[tauri::command]
pub async fn place_line(console: Console_<'_>, validator: String, threshold: f64) -> Answer<f64> {
    Ok(console.place_line(&validator, threshold).await?)
}

#[tauri::command]
pub async fn apply_head(console: Console_<'_>, validator: String) -> Answer<AppliedHead> {
    Ok(console.apply_head(&validator).await?)
}

#[tauri::command]
pub async fn head_versions(console: Console_<'_>, validator: String) -> Answer<Vec<HeadVersion>> {
    Ok(console.head_versions(&validator).await?)
}

#[tauri::command]
pub async fn revert_head(console: Console_<'_>, version: i64) -> Answer<AppliedHead> {
    Ok(console.revert_head(version).await?)
}
