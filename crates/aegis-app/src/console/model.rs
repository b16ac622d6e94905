//! Loading the model the settings name on the worker thread, and its state as the window sees it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use aegis_engine::{DownloadProgress, DownloadReport, LanguageModel, ModelRequest};
use aegis_guard::Guard;
use aegis_remote::RemoteModel;
use aegis_runtime::{ModelStatus, Worker};
use serde::Serialize;
use tokio::sync::watch;

use super::editor::describe;
use super::{Console, ConsoleEvent, EventSink, ModelChoice, QUEUE};

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

impl Console {
    /// Starts loading the model named by the settings on a new worker thread; the window stays
    /// usable and hears `Model` events as it goes.
    pub(super) fn load_model(self: &Arc<Self>) {
        let settings = self.settings();
        // A model server in Settings stands in for the local model Settings names.
        let backend = match &self.model_choice {
            ModelChoice::Settings => settings.backend_url().map(str::to_string),
            _ => None,
        };
        let (model_name, loaded) = match &self.model_choice {
            ModelChoice::Settings => (
                backend.clone().unwrap_or_else(|| settings.model.clone()),
                None,
            ),
            ModelChoice::Named(name) => (name.clone(), None),
            ModelChoice::Loaded(engine) => (engine.info().id.clone(), Some(engine.clone())),
        };
        self.model
            .send_replace(loading_state(&model_name, "starting"));
        self.events.emit(ConsoleEvent::Model(self.model_state()));
        let state = self.model.clone();
        let events = self.events.clone();
        let problems = self.problems.clone();
        let prompts = self.prompts_dir();
        let language = self.rejection_language();
        let request = settings.model_request(&model_name);
        let started = Instant::now();
        let worker = Worker::start(QUEUE, move || {
            let engine = match (loaded, backend) {
                (Some(engine), _) => engine,
                (None, Some(url)) => {
                    state.send_modify(|s| s.message = format!("connecting to {url}"));
                    let remote = RemoteModel::connect_with_cached_tokenizer(&url)
                        .map_err(|e| format!("the model server at {url}: {e}"))?;
                    Arc::new(remote) as Arc<dyn LanguageModel>
                }
                (None, None) => load_engine(request.map_err(|e| e.to_string())?, &state, &events)?,
            };
            state.send_modify(|s| {
                s.message = "reading templates".into();
                s.download = None;
            });
            let prompts = prompts.map_err(|e| e.to_string())?;
            let (guard, found) = Guard::from_dir(engine, &prompts).map_err(|e| e.to_string())?;
            *problems.write().unwrap_or_else(|p| p.into_inner()) = describe(&found);
            Ok(guard.with_language(language))
        });
        *self.worker.write().unwrap_or_else(|p| p.into_inner()) = Some(worker.clone());
        // The worker says when it is ready; the window hears it from here.
        let this = Arc::downgrade(self);
        tokio::spawn(async move {
            let status = worker.settled().await;
            let Some(console) = this.upgrade() else {
                return;
            };
            console.model.send_modify(|s| {
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
            });
            console
                .events
                .emit(ConsoleEvent::Model(console.model.borrow().clone()));
        });
    }

    pub fn model_state(&self) -> ModelState {
        self.model.borrow().clone()
    }

    /// Waits until the model is ready or failed (tests, and callers that must not race it), at
    /// most `timeout`.
    pub async fn wait_for_model(&self, timeout: Duration) -> ModelState {
        let mut state = self.model.subscribe();
        let settled = state.wait_for(|s| s.status != "loading");
        let _ = tokio::time::timeout(timeout, settled).await;
        self.model_state()
    }
}

pub(super) fn loading_state(model: &str, message: &str) -> ModelState {
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

/// Loads the model `request` names, telling the window how a download goes.
fn load_engine(
    mut request: ModelRequest,
    state: &Arc<watch::Sender<ModelState>>,
    events: &Arc<dyn EventSink>,
) -> Result<Arc<dyn LanguageModel>, String> {
    let on_download: aegis_engine::DownloadListener = {
        let state = state.clone();
        let events = events.clone();
        Arc::new(move |p: &DownloadProgress| {
            state.send_modify(|s| {
                s.message = format!("downloading {}", p.file);
                s.download = Some(Download {
                    file: p.file.clone(),
                    downloaded: p.downloaded,
                    total: p.total,
                });
            });
            events.emit(ConsoleEvent::Model(state.borrow().clone()));
        })
    };
    request.download = DownloadReport::Listener(on_download);
    let (engine, _) = request
        .load()
        .map_err(|e| format!("loading {}: {e}", request.model))?;
    Ok(Arc::new(engine))
}
