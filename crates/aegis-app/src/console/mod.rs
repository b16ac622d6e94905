//! The console as a service: everything the window asks for, without the window. Tauri commands
//! are thin calls into this; tests drive it directly with the real model and a real history file.

mod editor;
mod history;
mod imports;
mod model;
mod model_state;

pub use editor::TryRow;
pub use history::{Exported, HistoryQuery};
pub(crate) use imports::readable_data_file;
pub use imports::FilePreview;
pub use model_state::{Download, LoadStatus, ModelState};

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use aegis_engine::LanguageModel;
use aegis_guard::{find_prompts_dir, GuardInput, Language, Turn, TurnsChecked, Verdict};
use aegis_runtime::{check_and_record, Submitter, Worker, WorkerError};
use aegis_store::{Source, Store};
use serde::Serialize;
use tokio::sync::watch;

use crate::error::ConsoleError;
use crate::http::{HttpServer, HttpStatus};
use crate::settings::Settings;
use crate::templates::TemplateProblem;

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
    /// How far the training `train_id` is: the stage ("reading messages", "training", "checking
    /// for flips") and its count.
    Train {
        train_id: String,
        stage: String,
        done: usize,
        total: usize,
    },
    /// What just happened to the Playground's exchange `playground_id`.
    Playground {
        playground_id: String,
        step: crate::playground::step::PlaygroundStep,
    },
}

/// Where the window's events go: Tauri's emitter in the app, a recorder in tests.
pub trait EventSink: Send + Sync + 'static {
    fn emit(&self, event: ConsoleEvent);
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
    /// The templates folder when the settings name none (tests); without either, the guard's
    /// one rule finds it (`AEGIS_PROMPTS`, beside the app, then the data folder).
    pub prompts_dir: Option<PathBuf>,
    pub events: Arc<dyn EventSink>,
    pub model: ModelChoice,
}

/// Which model the console runs.
#[derive(Clone)]
pub enum ModelChoice {
    /// The one Settings name.
    Settings,
    /// A name, path or repo id that wins over Settings (`AEGIS_MODEL`).
    Named(String),
    /// An engine the caller has loaded already: test binaries share one, as the CLI's and the
    /// server's tests do, instead of loading the model once per console.
    Loaded(Arc<dyn LanguageModel>),
}

pub struct Console {
    data_dir: PathBuf,
    prompts_dir: Option<PathBuf>,
    model_choice: ModelChoice,
    started: Instant,
    settings: Mutex<Settings>,
    store: Arc<Store>,
    /// None only until `start` has begun loading the model.
    worker: RwLock<Option<Worker>>,
    /// Watched, so a caller can wait for the model without polling.
    model: Arc<watch::Sender<ModelState>>,
    /// Broken templates and unusable heads from the last (re)load.
    problems: Arc<RwLock<Vec<(String, TemplateProblem)>>>,
    pub(crate) events: Arc<dyn EventSink>,
    http: tokio::sync::Mutex<HttpServer>,
    /// Cancel flags of running imports, evaluations and trainings, by the id the window gave
    /// them.
    pub(crate) running: Mutex<HashMap<String, Arc<AtomicBool>>>,
    /// Heads trained in the Teach view and not yet applied, by validator.
    pub(crate) trained: Mutex<HashMap<String, aegis_heads::Head>>,
}

impl Console {
    pub async fn start(config: ConsoleConfig) -> Result<Arc<Self>, ConsoleError> {
        std::fs::create_dir_all(&config.data_dir).map_err(|source| ConsoleError::Io {
            path: config.data_dir.clone(),
            source,
        })?;
        let settings = Settings::load(&config.data_dir.join("settings.json"));
        let database = settings.history_database(&config.data_dir)?;
        let store = Arc::new(Store::connect(&database).await?);
        let model = Arc::new(watch::Sender::new(ModelState::loading(&settings.model, "")));
        let console = Arc::new(Self {
            data_dir: config.data_dir,
            prompts_dir: config.prompts_dir,
            model_choice: config.model,
            started: Instant::now(),
            settings: Mutex::new(settings),
            store,
            worker: RwLock::new(None),
            model,
            problems: Arc::new(RwLock::new(Vec::new())),
            events: config.events,
            http: tokio::sync::Mutex::new(HttpServer::default()),
            running: Mutex::new(HashMap::new()),
            trained: Mutex::new(HashMap::new()),
        });
        console.finish_interrupted_applies().await;
        console.load_model();
        let http = console.settings().http;
        if http.enabled {
            if let Err(e) = console.apply_http(&http).await {
                tracing::warn!(error = %e, "the HTTP endpoint did not start");
            }
        }
        Ok(console)
    }

    /// The name this console acts as, for the team's roles and the audit log: the reviewer
    /// named in Settings.
    pub(crate) fn actor(&self) -> String {
        lock(&self.settings).reviewer.clone()
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

    /// The templates folder: the one Settings names, else the one the console was started with,
    /// else wherever the guard's rule finds one; the error says where it looked.
    pub fn prompts_dir(&self) -> Result<PathBuf, ConsoleError> {
        let configured = lock(&self.settings).prompts_dir.trim().to_string();
        let given = if configured.is_empty() {
            self.prompts_dir.clone()
        } else {
            Some(PathBuf::from(configured))
        };
        Ok(find_prompts_dir(given.as_deref(), Some(&self.data_dir))?)
    }

    /// Finishes an apply a kill or crash interrupted in the templates folder, before the guard
    /// reads it (see `aegis_teach::finish_interrupted_applies`). A failure is logged, not fatal:
    /// the journal stays and the next start tries again.
    async fn finish_interrupted_applies(&self) {
        let Ok(dir) = self.prompts_dir() else {
            return;
        };
        match aegis_teach::finish_interrupted_applies(&self.store, &self.actor(), &dir).await {
            Ok(finished) => {
                for applied in finished {
                    tracing::warn!(
                        validator = %applied.validator,
                        version = applied.version,
                        "finished an interrupted head apply"
                    );
                }
            }
            Err(e) => tracing::error!(error = %e, "cannot finish an interrupted head apply"),
        }
    }

    fn rejection_language(&self) -> Option<Language> {
        lock(&self.settings).rejection_language.fixed()
    }

    pub fn app_info(&self) -> AppInfo {
        AppInfo {
            version: env!("CARGO_PKG_VERSION").into(),
            data_dir: self.data_dir.display().to_string(),
            history_path: self.store.database().to_string(),
            prompts_dir: self
                .prompts_dir()
                .map_or_else(|e| e.to_string(), |dir| dir.display().to_string()),
            memory_bytes: resident_memory(),
            uptime_ms: self.started.elapsed().as_secs_f64() * 1e3,
        }
    }

    /// Checks a typed message and records it.
    pub async fn check(&self, text: String) -> Result<CheckResult, ConsoleError> {
        self.check_input(GuardInput::message(text)).await
    }

    /// Checks a typed conversation's last turn, or every turn, each in the context of the turns
    /// before it, and records each verdict with its context.
    pub async fn check_conversation(
        &self,
        turns: Vec<Turn>,
        checked: TurnsChecked,
    ) -> Result<Vec<CheckResult>, ConsoleError> {
        let mut results = Vec::new();
        for input in GuardInput::from_conversation(&turns, checked)? {
            results.push(self.check_input(input).await?);
        }
        Ok(results)
    }

    async fn check_input(&self, input: GuardInput) -> Result<CheckResult, ConsoleError> {
        check_size(input.text())?;
        let submitter = Submitter {
            source: Source::Typed,
            user_id: None,
        };
        let recorded = check_and_record(&self.worker()?, &self.store, input, submitter).await?;
        let checked = recorded.checked;
        let verdict_id = recorded.verdict_id?;
        Ok(CheckResult {
            verdict_id,
            verdict: checked.verdict,
        })
    }

    /// Applies new settings: reloads the model when it (or what the heads read, or how
    /// rejections are written) changed, the guard when the templates folder or rejection language
    /// did, and starts or stops the HTTP endpoint.
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
        if new.prompts_dir != old.prompts_dir {
            self.finish_interrupted_applies().await;
        }
        if new.model != old.model
            || new.device != old.device
            || new.weights != old.weights
            || new.backend != old.backend
            || new.encoder != old.encoder
            || new.encoder_server != old.encoder_server
            || new.generate_rejection != old.generate_rejection
        {
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

pub(crate) fn check_size(text: &str) -> Result<(), ConsoleError> {
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
