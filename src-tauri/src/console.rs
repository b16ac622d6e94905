//! The console as a service: everything the window asks for, without the window. Tauri commands
//! are thin calls into this; tests drive it directly with the real model and a real history file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use aegis_engine::{DownloadProgress, DownloadReport, LanguageModel};
use aegis_guard::{Guard, GuardError, Language, Status, Verdict};
use aegis_import::{csv_columns, import_file, CheckFailure, ImportSummary, MessageFile};
use aegis_server::{LoadedGuard, ModelStatus, Worker, WorkerError};
use aegis_store::{
    parse_day, Cursor, Decision, ExportFormat, HistoryFilter, HistoryPage, NewReview, NewVerdict,
    ReviewQueue, Source, Store, TemplateSave, VerdictDetail,
};
use serde::{Deserialize, Serialize};

use crate::error::ConsoleError;
use crate::http::{HttpServer, HttpStatus};
use crate::settings::Settings;
use crate::templates::{self, TemplateFile, TemplateProblem};

/// How many checks may wait for the model at once (the typing user, an import, HTTP clients).
const QUEUE: usize = 64;
/// Longest message accepted from the window, in bytes (the HTTP API's limit too).
pub const MAX_TEXT_BYTES: usize = 64 * 1024;

/// Something the window should hear about without asking.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ConsoleEvent {
    Model(ModelState),
    /// Templates changed on disk (saved here or by another editor) and the guard reloaded.
    TemplatesChanged,
    Import {
        import_id: String,
        progress: aegis_import::ImportProgress,
    },
    /// Messages of a dataset scored so far by the evaluation `eval_id`.
    Eval {
        eval_id: String,
        done: usize,
        total: usize,
    },
}

/// Where the window's events go: Tauri's emitter in the app, a recorder in tests.
pub trait EventSink: Send + Sync + 'static {
    fn emit(&self, event: ConsoleEvent);
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ModelState {
    /// loading, ready or failed.
    pub status: String,
    pub model: String,
    /// cpu or cuda:N.
    pub device: String,
    /// f32, bf16 or quantized.
    pub weights: String,
    /// Random weights for speed tests (`aegis model synth`): verdicts mean nothing.
    pub synthetic: bool,
    /// Why it failed, or what it is doing while loading.
    pub message: String,
    pub download: Option<Download>,
    /// From the start of loading to ready.
    pub load_ms: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Download {
    pub file: String,
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub downloaded: u64,
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub total: u64,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct CheckResult {
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub verdict_id: i64,
    pub verdict: Verdict,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct FilePreview {
    pub path: String,
    /// CSV header; null for TXT and JSONL.
    pub columns: Option<Vec<String>>,
    /// The column chosen when the user chooses none.
    pub suggested_column: Option<String>,
}

/// History filters as the window sends them.
#[derive(Debug, Clone, Default, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(default)]
pub struct HistoryQuery {
    pub text: Option<String>,
    /// passed or failed.
    pub status: Option<String>,
    /// Verdicts this validator failed.
    pub validator: Option<String>,
    /// typed, import, http or cli.
    pub source: Option<String>,
    /// YYYY-MM-DD, inclusive.
    pub since: Option<String>,
    /// YYYY-MM-DD, inclusive.
    pub until: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct TryRow {
    pub text: String,
    pub saved: Verdict,
    pub edited: Verdict,
    /// The edited template's validator passed one way and fails the other (or back).
    pub flipped: bool,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct AppInfo {
    pub version: String,
    pub data_dir: String,
    pub history_path: String,
    pub prompts_dir: String,
    /// Resident memory of the app now, in bytes (Linux), for the settings screen.
    #[cfg_attr(feature = "ts", ts(type = "number | null"))]
    pub memory_bytes: Option<u64>,
    /// From the app's start to this call, for measuring launch.
    pub uptime_ms: f64,
}

pub struct ConsoleConfig {
    pub data_dir: PathBuf,
    /// Used when the settings name no templates folder.
    pub default_prompts_dir: PathBuf,
    pub events: Arc<dyn EventSink>,
    /// Overrides the settings' model (tests, `AEGIS_MODEL`).
    pub model_override: Option<String>,
}

pub struct Console {
    data_dir: PathBuf,
    default_prompts_dir: PathBuf,
    model_override: Option<String>,
    started: Instant,
    settings: Mutex<Settings>,
    store: Arc<Store>,
    /// None only until `start` has begun loading the model.
    worker: RwLock<Option<Worker>>,
    model: Arc<Mutex<ModelState>>,
    /// Broken templates and unusable heads from the last (re)load.
    problems: Arc<RwLock<Vec<(String, TemplateProblem)>>>,
    pub(crate) events: Arc<dyn EventSink>,
    http: tokio::sync::Mutex<HttpServer>,
    /// Cancel flags of running imports and evaluations, by the id the window gave them.
    pub(crate) running: Mutex<HashMap<String, Arc<AtomicBool>>>,
}

impl Console {
    pub async fn start(config: ConsoleConfig) -> Result<Arc<Self>, ConsoleError> {
        std::fs::create_dir_all(&config.data_dir).map_err(|source| ConsoleError::Io {
            path: config.data_dir.clone(),
            source,
        })?;
        let settings = Settings::load(&config.data_dir.join("settings.json"));
        let store = Arc::new(Store::open(&config.data_dir.join("history.db")).await?);
        let model = Arc::new(Mutex::new(loading_state(&settings.model, "")));
        let console = Arc::new(Self {
            data_dir: config.data_dir,
            default_prompts_dir: config.default_prompts_dir,
            model_override: config.model_override,
            started: Instant::now(),
            settings: Mutex::new(settings),
            store,
            worker: RwLock::new(None),
            model,
            problems: Arc::new(RwLock::new(Vec::new())),
            events: config.events,
            http: tokio::sync::Mutex::new(HttpServer::default()),
            running: Mutex::new(HashMap::new()),
        });
        console.load_model();
        let http = console.settings().http;
        if http.enabled {
            if let Err(e) = console.apply_http(&http).await {
                tracing::warn!(error = %e, "the HTTP endpoint did not start");
            }
        }
        Ok(console)
    }

    pub fn settings(&self) -> Settings {
        lock(&self.settings).clone()
    }

    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    pub(crate) fn worker(&self) -> Result<Worker, ConsoleError> {
        self.worker
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or(ConsoleError::Worker(WorkerError::Loading))
    }

    pub fn prompts_dir(&self) -> PathBuf {
        let configured = lock(&self.settings).prompts_dir.clone();
        if configured.trim().is_empty() {
            self.default_prompts_dir.clone()
        } else {
            PathBuf::from(configured)
        }
    }

    fn rejection_language(&self) -> Option<Language> {
        match lock(&self.settings).rejection_language.as_str() {
            "id" => Some(Language::Indonesian),
            "en" => Some(Language::English),
            _ => None,
        }
    }

    /// Starts loading the model named by the settings on a new worker thread; the window stays
    /// usable and hears `Model` events as it goes.
    fn load_model(self: &Arc<Self>) {
        let settings = self.settings();
        let model_name = self
            .model_override
            .clone()
            .unwrap_or_else(|| settings.model.clone());
        *lock(&self.model) = loading_state(&model_name, "starting");
        self.events.emit(ConsoleEvent::Model(self.model_state()));
        let state = self.model.clone();
        let events = self.events.clone();
        let problems = self.problems.clone();
        let prompts = self.prompts_dir();
        let language = self.rejection_language();
        let request = settings.model_request(&model_name);
        let started = Instant::now();
        let worker = Worker::start(QUEUE, move || {
            let on_download: aegis_engine::DownloadListener = {
                let state = state.clone();
                let events = events.clone();
                Arc::new(move |p: &DownloadProgress| {
                    let snapshot = {
                        let mut s = lock(&state);
                        s.message = format!("downloading {}", p.file);
                        s.download = Some(Download {
                            file: p.file.clone(),
                            downloaded: p.downloaded,
                            total: p.total,
                        });
                        s.clone()
                    };
                    events.emit(ConsoleEvent::Model(snapshot));
                })
            };
            let mut request = request.map_err(|e| e.to_string())?;
            request.download = DownloadReport::Listener(on_download);
            let (engine, _) = request
                .load()
                .map_err(|e| format!("loading {}: {e}", request.model))?;
            {
                let mut s = lock(&state);
                s.message = "reading templates".into();
                s.download = None;
            }
            let (guard, found) =
                Guard::from_dir(Arc::new(engine), &prompts).map_err(|e| e.to_string())?;
            *problems.write().unwrap_or_else(|p| p.into_inner()) = describe(&found);
            Ok(guard.with_language(language))
        });
        *self.worker.write().unwrap_or_else(|p| p.into_inner()) = Some(worker.clone());
        // The worker says when it is ready; the window hears it from here.
        let this = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let status = worker.status();
                if status != ModelStatus::Loading {
                    let Some(console) = this.upgrade() else {
                        return;
                    };
                    let snapshot = {
                        let mut s = lock(&console.model);
                        match status {
                            ModelStatus::Ready(info) => {
                                s.status = "ready".into();
                                s.model = info.id;
                                s.device = info.device;
                                s.weights = info.weight_format;
                                s.synthetic = info.synthetic;
                                s.message = String::new();
                                s.load_ms = Some(started.elapsed().as_secs_f64() * 1e3);
                                tracing::info!(load_ms = s.load_ms, "model ready");
                            }
                            ModelStatus::Failed(message) => {
                                s.status = "failed".into();
                                s.message = message;
                            }
                            ModelStatus::Loading => {}
                        }
                        s.download = None;
                        s.clone()
                    };
                    console.events.emit(ConsoleEvent::Model(snapshot));
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
    }

    pub fn model_state(&self) -> ModelState {
        lock(&self.model).clone()
    }

    /// Waits until the model is ready or failed (tests, and callers that must not race it).
    pub async fn wait_for_model(&self, timeout: Duration) -> ModelState {
        let deadline = Instant::now() + timeout;
        loop {
            let state = self.model_state();
            if state.status != "loading" || Instant::now() > deadline {
                return state;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn app_info(&self) -> AppInfo {
        AppInfo {
            version: env!("CARGO_PKG_VERSION").into(),
            data_dir: self.data_dir.display().to_string(),
            history_path: self.store.path().display().to_string(),
            prompts_dir: self.prompts_dir().display().to_string(),
            memory_bytes: resident_memory(),
            uptime_ms: self.started.elapsed().as_secs_f64() * 1e3,
        }
    }

    /// Checks a typed message and records it.
    pub async fn check(&self, text: String) -> Result<CheckResult, ConsoleError> {
        check_size(&text)?;
        if text.trim().is_empty() {
            return Err(GuardError::EmptyText.into());
        }
        let checked = self.worker()?.check(text.clone()).await?;
        let verdict_id = self
            .store
            .record(&NewVerdict {
                text: &text,
                source: Source::Typed,
                user_id: None,
                import: None,
                verdict: &checked.verdict,
                templates: &checked.templates,
            })
            .await?;
        Ok(CheckResult {
            verdict_id,
            verdict: checked.verdict,
        })
    }

    pub fn preview_file(&self, path: &Path) -> Result<FilePreview, ConsoleError> {
        let columns = csv_columns(path)?;
        let suggested_column = columns.as_ref().and_then(|c| {
            ["text", "question", "message"]
                .iter()
                .find(|want| c.iter().any(|h| h.eq_ignore_ascii_case(want)))
                .and_then(|want| c.iter().find(|h| h.eq_ignore_ascii_case(want)).cloned())
                .or_else(|| c.first().cloned())
        });
        Ok(FilePreview {
            path: path.display().to_string(),
            columns,
            suggested_column,
        })
    }

    /// Imports a file under `import_id`; progress goes out as events, and `cancel` with
    /// the same id stops it between rows. The same file again resumes where it stopped.
    pub async fn import(
        &self,
        import_id: String,
        path: &Path,
        column: Option<String>,
    ) -> Result<ImportSummary, ConsoleError> {
        let file = MessageFile::read(path, column.as_deref())?;
        let cancel = Arc::new(AtomicBool::new(false));
        lock(&self.running).insert(import_id.clone(), cancel.clone());
        let worker = self.worker()?;
        let events = self.events.clone();
        let result = import_file(
            &self.store,
            &file,
            None,
            |text| {
                let worker = worker.clone();
                async move {
                    if text.len() > MAX_TEXT_BYTES {
                        return Err(CheckFailure::BadRow(too_long(text.len())));
                    }
                    loop {
                        match worker.check(text.clone()).await {
                            Ok(c) => return Ok((c.verdict, c.templates)),
                            // Typed checks and HTTP clients share the queue; wait our turn.
                            Err(WorkerError::Busy(_)) => {
                                tokio::time::sleep(Duration::from_millis(200)).await
                            }
                            Err(WorkerError::Guard(e)) => {
                                return Err(CheckFailure::BadRow(e.to_string()))
                            }
                            Err(e) => return Err(CheckFailure::Fatal(e.to_string())),
                        }
                    }
                }
            },
            |progress| {
                events.emit(ConsoleEvent::Import {
                    import_id: import_id.clone(),
                    progress: progress.clone(),
                })
            },
            &cancel,
        )
        .await;
        lock(&self.running).remove(&import_id);
        Ok(result?)
    }

    /// Stops the import or evaluation running under `id` between messages.
    pub fn cancel(&self, run_id: &str) -> bool {
        match lock(&self.running).get(run_id) {
            Some(flag) => {
                flag.store(true, Ordering::Relaxed);
                true
            }
            None => false,
        }
    }

    pub async fn review_queue(&self, limit: u32) -> Result<ReviewQueue, ConsoleError> {
        let margin = lock(&self.settings).review_margin;
        Ok(self.store.review_queue(margin, limit).await?)
    }

    pub async fn review(
        &self,
        verdict_id: i64,
        decision: Decision,
        note: String,
    ) -> Result<i64, ConsoleError> {
        let reviewer = lock(&self.settings).reviewer.clone();
        Ok(self
            .store
            .add_review(&NewReview {
                verdict_id,
                reviewer,
                decision,
                validators: Default::default(),
                note,
            })
            .await?)
    }

    pub async fn undo_review(&self, review_id: i64) -> Result<bool, ConsoleError> {
        Ok(self.store.delete_review(review_id).await?)
    }

    pub async fn history(
        &self,
        query: &HistoryQuery,
        after: Option<Cursor>,
        limit: u32,
    ) -> Result<HistoryPage, ConsoleError> {
        Ok(self.store.list(&filter_of(query)?, after, limit).await?)
    }

    pub async fn history_count(&self, query: &HistoryQuery) -> Result<i64, ConsoleError> {
        Ok(self.store.count(&filter_of(query)?).await?)
    }

    pub async fn verdict(&self, verdict_id: i64) -> Result<VerdictDetail, ConsoleError> {
        self.store
            .get(verdict_id)
            .await?
            .ok_or(ConsoleError::NotFound(verdict_id))
    }

    /// Writes the filtered history to `path` (CSV or JSONL by its extension); returns the count.
    pub async fn export(&self, query: &HistoryQuery, path: &Path) -> Result<u64, ConsoleError> {
        let format = match path.extension().and_then(|e| e.to_str()) {
            Some("csv") => ExportFormat::Csv,
            Some("jsonl") => ExportFormat::Jsonl,
            _ => {
                return Err(ConsoleError::Invalid(
                    "export to a .csv or .jsonl file".into(),
                ))
            }
        };
        let filter = filter_of(query)?;
        let mut buffer: Vec<u8> = Vec::new();
        let count = self.store.export(&filter, format, &mut buffer).await?;
        crate::settings::write_atomically(path, &buffer)?;
        Ok(count)
    }

    /// Every template file, valid or not, and how the running guard scores it.
    pub fn templates(&self) -> Result<Vec<TemplateFile>, ConsoleError> {
        let dir = self.prompts_dir();
        let guard = self.worker().ok().and_then(|w| w.guard());
        let problems = self
            .problems
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let files = templates::list(&dir)?;
        Ok(files
            .into_iter()
            .map(|(key, path, content)| {
                let parsed = templates::parse(&dir, &key, &content);
                let scored_by = guard
                    .as_ref()
                    .and_then(|g| {
                        let slot = g.validators().iter().position(|v| v.key == key)?;
                        Some(if g.heads()[slot].is_some() {
                            "head"
                        } else {
                            "prompt"
                        })
                    })
                    .unwrap_or("off");
                let (name, threshold, content_hash, problem) = match parsed {
                    Ok(v) => (
                        Some(v.name),
                        Some(v.threshold),
                        Some(v.content_hash),
                        // A valid file can still have a refused head: worth showing.
                        problems
                            .iter()
                            .find(|(k, _)| *k == key)
                            .map(|(_, p)| p.clone()),
                    ),
                    Err(ConsoleError::Template { message, line, .. }) => {
                        (None, None, None, Some(TemplateProblem { message, line }))
                    }
                    Err(e) => (
                        None,
                        None,
                        None,
                        Some(TemplateProblem {
                            message: e.to_string(),
                            line: None,
                        }),
                    ),
                };
                TemplateFile {
                    key,
                    path: path.display().to_string(),
                    content,
                    name,
                    threshold,
                    content_hash,
                    problem,
                    scored_by: scored_by.into(),
                }
            })
            .collect())
    }

    /// Validates and writes a template, records the version, and reloads the guard so the very
    /// next check uses it. A refused template is not written; the error names its line.
    pub async fn save_template(
        &self,
        key: &str,
        content: &str,
    ) -> Result<TemplateSave, ConsoleError> {
        let validator = templates::save(&self.prompts_dir(), key, content)?;
        let saved = self
            .store
            .save_template_version(key, &validator.content_hash, &validator.content)
            .await?;
        self.reload_templates()?;
        Ok(saved)
    }

    pub async fn template_versions(&self, key: &str) -> Result<Vec<TemplateSave>, ConsoleError> {
        Ok(self.store.template_saves(key, 200).await?)
    }

    /// Rebuilds the guard from the files on disk, on the loaded model. A broken file drops its
    /// validator (reported) while the others keep working.
    pub fn reload_templates(&self) -> Result<(), ConsoleError> {
        let Ok(worker) = self.worker() else {
            return Ok(()); // Not started yet: the load reads the files.
        };
        let Some(current) = worker.guard() else {
            return Ok(()); // The model is loading; it will read the files when it is done.
        };
        let model: Arc<dyn LanguageModel> = current.model().clone();
        let (guard, found) = Guard::from_dir(model, &self.prompts_dir())?;
        *self.problems.write().unwrap_or_else(|p| p.into_inner()) = describe(&found);
        worker.replace_guard(guard.with_language(self.rejection_language()));
        self.events.emit(ConsoleEvent::TemplatesChanged);
        Ok(())
    }

    /// Reloads the guard whenever a template file in the folder changes (another editor, git),
    /// and tells the window. Runs until the app ends.
    pub async fn watch_templates(self: Arc<Self>) {
        use notify::Watcher;
        let dir = self.prompts_dir();
        let (changed, mut changes) = tokio::sync::mpsc::unbounded_channel::<()>();
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            let touches_template = event.is_ok_and(|e| {
                e.paths
                    .iter()
                    .any(|p| p.extension().is_some_and(|x| x == "txt"))
            });
            if touches_template {
                let _ = changed.send(());
            }
        });
        let mut watcher = match watcher {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch the templates; edits elsewhere need a restart");
                return;
            }
        };
        if let Err(e) = watcher.watch(&dir, notify::RecursiveMode::NonRecursive) {
            tracing::warn!(error = %e, dir = %dir.display(), "cannot watch the templates folder");
            return;
        }
        while changes.recv().await.is_some() {
            // Editors save in bursts (temporary file, rename): let it settle, reload once.
            tokio::time::sleep(Duration::from_millis(250)).await;
            while changes.try_recv().is_ok() {}
            if let Err(e) = self.reload_templates() {
                tracing::warn!(error = %e, "reloading the templates failed; the guard keeps the last good set");
            }
        }
    }

    /// Runs `messages` through the saved guard and through one with `content` as template `key`.
    pub async fn try_template(
        &self,
        key: &str,
        content: &str,
        messages: Vec<String>,
    ) -> Result<Vec<TryRow>, ConsoleError> {
        if messages.len() > 20 {
            return Err(ConsoleError::Invalid(
                "try at most 20 messages at a time".into(),
            ));
        }
        let edited = templates::parse(&self.prompts_dir(), key, content)?;
        let worker = self.worker()?;
        let saved_guard = worker.loaded().ok_or(WorkerError::Loading)?;
        // Both run every prompt: the author sees the prompt score move even where a head decides.
        let saved_guard =
            LoadedGuard::new(Guard::clone(&saved_guard.guard).with_prompt_scores(true));
        let edited_guard = LoadedGuard::new(saved_guard.guard.with_validator(edited));
        let mut rows = Vec::new();
        for text in messages.into_iter().filter(|m| !m.trim().is_empty()) {
            check_size(&text)?;
            let saved = worker
                .check_with(saved_guard.clone(), text.clone())
                .await?
                .verdict;
            let edited = worker
                .check_with(edited_guard.clone(), text.clone())
                .await?
                .verdict;
            let failed = |v: &Verdict| v.results.iter().find(|r| r.key == key).map(|r| !r.passed);
            let flipped = failed(&saved) != failed(&edited);
            rows.push(TryRow {
                text,
                saved,
                edited,
                flipped,
            });
        }
        Ok(rows)
    }

    /// Applies new settings: reloads the model when it changed, the guard when the templates
    /// folder or rejection language did, and starts or stops the HTTP endpoint.
    pub async fn update_settings(
        self: &Arc<Self>,
        new: Settings,
    ) -> Result<Settings, ConsoleError> {
        new.validate()?;
        let old = self.settings();
        if new.http.enabled {
            crate::http::validate(&new.http)?;
        }
        new.save(&self.data_dir.join("settings.json"))?;
        *lock(&self.settings) = new.clone();
        if new.model != old.model || new.device != old.device || new.weights != old.weights {
            self.load_model();
            // The endpoint serves through the worker; give it the new one.
            if new.http.enabled {
                self.http.lock().await.stop().await;
            }
        } else if new.prompts_dir != old.prompts_dir
            || new.rejection_language != old.rejection_language
        {
            self.reload_templates()?;
        }
        self.apply_http(&new.http).await?;
        Ok(new)
    }

    async fn apply_http(&self, http: &crate::settings::HttpSettings) -> Result<(), ConsoleError> {
        let mut server = self.http.lock().await;
        if http.enabled {
            server
                .ensure(http, self.worker()?, self.store.clone())
                .await
        } else {
            server.stop().await;
            Ok(())
        }
    }

    pub async fn http_status(&self) -> HttpStatus {
        self.http.lock().await.status()
    }

    pub async fn shutdown(&self) {
        self.http.lock().await.stop().await;
    }
}

fn loading_state(model: &str, message: &str) -> ModelState {
    ModelState {
        status: "loading".into(),
        model: model.into(),
        device: String::new(),
        weights: String::new(),
        synthetic: false,
        message: message.into(),
        download: None,
        load_ms: None,
    }
}

fn describe(problems: &[GuardError]) -> Vec<(String, TemplateProblem)> {
    problems
        .iter()
        .map(|p| {
            let (path, message) = match p {
                GuardError::Template { path, problem } => (path.clone(), problem.clone()),
                GuardError::HeadRefused { path, .. } => (path.clone(), p.to_string()),
                other => (PathBuf::new(), other.to_string()),
            };
            let key = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let content = std::fs::read_to_string(&path).unwrap_or_default();
            let line = match p {
                GuardError::Template { .. } => templates::problem_line(&content, &message),
                _ => None,
            };
            (key, TemplateProblem { message, line })
        })
        .collect()
}

fn filter_of(query: &HistoryQuery) -> Result<HistoryFilter, ConsoleError> {
    let present = |s: &Option<String>| {
        s.as_ref()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    };
    const DAY_MS: i64 = 86_400_000;
    Ok(HistoryFilter {
        status: match present(&query.status).as_deref() {
            None => None,
            Some("passed") => Some(Status::Passed),
            Some("failed") => Some(Status::Failed),
            Some(other) => {
                return Err(ConsoleError::Invalid(format!(
                    "unknown status {other:?}: use passed or failed"
                )))
            }
        },
        failed_validator: present(&query.validator),
        source: present(&query.source)
            .map(|s| s.parse::<Source>())
            .transpose()?,
        since: present(&query.since).map(|d| parse_day(&d)).transpose()?,
        until: present(&query.until)
            .map(|d| parse_day(&d).map(|start| start + DAY_MS))
            .transpose()?,
        text: present(&query.text),
        ..HistoryFilter::default()
    })
}

fn check_size(text: &str) -> Result<(), ConsoleError> {
    if text.len() > MAX_TEXT_BYTES {
        return Err(ConsoleError::Invalid(too_long(text.len())));
    }
    Ok(())
}

fn too_long(bytes: usize) -> String {
    format!(
        "the message is {bytes} bytes; the console checks messages up to {} KiB",
        MAX_TEXT_BYTES / 1024
    )
}

fn resident_memory() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}
