//! Loading the model the settings name on the worker thread, and its state as the window sees it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use aegis_engine::{DownloadProgress, DownloadReport, LanguageModel};
use aegis_runtime::{GuardSetup, ModelSource, ModelStatus, Worker};
use tokio::sync::watch;

use super::editor::describe;
use super::model_state::{Download, LoadStatus, ModelState};
use super::{Console, ConsoleEvent, EventSink, ModelChoice, QUEUE};

impl Console {
    /// Starts loading the model named by the settings on a new worker thread; the window stays
    /// usable and hears `Model` events as it goes.
    pub(super) fn load_model(self: &Arc<Self>) {
        let settings = self.settings();
        // A model server in Settings stands in for the local model Settings names.
        let (model_name, source) = match &self.model_choice {
            ModelChoice::Settings => match settings.backend_url() {
                Some(url) => (url.to_string(), Ok(Source::Server(url.to_string()))),
                None => (
                    settings.model.clone(),
                    Ok(Source::Local(settings.model.clone())),
                ),
            },
            ModelChoice::Named(name) => (name.clone(), Ok(Source::Local(name.clone()))),
            ModelChoice::Loaded(engine) => {
                (engine.info().id.clone(), Ok(Source::Loaded(engine.clone())))
            }
        };
        let source: Result<Source, String> = source;
        self.model
            .send_replace(ModelState::loading(&model_name, "starting"));
        self.events.emit(ConsoleEvent::Model(self.model_state()));
        let state = self.model.clone();
        let events = self.events.clone();
        let problems = self.problems.clone();
        let prompts = self.prompts_dir();
        let language = self.rejection_language();
        let started = Instant::now();
        let worker = Worker::start(QUEUE, move || {
            let model = match source? {
                Source::Loaded(engine) => ModelSource::Loaded(engine),
                Source::Server(url) => {
                    state.send_modify(|s| s.message = format!("connecting to {url}"));
                    ModelSource::Server(url)
                }
                Source::Local(name) => {
                    let mut request = settings.model_request(&name).map_err(|e| e.to_string())?;
                    request.download = download_report(&state, &events);
                    ModelSource::Local(request)
                }
            };
            // The guard the command line and the server build from the same choices.
            let setup = GuardSetup {
                model,
                heads_read: settings.heads_read().map_err(|e| e.to_string())?,
                encoder_arithmetic: Default::default(),
                prompts: prompts.map_err(|e| e.to_string())?,
                rejection: settings.rejection_mode(),
                language,
            };
            if setup.heads_read.is_encoder() {
                state.send_modify(|s| {
                    s.message = format!("loading the model and the encoder ({})", settings.encoder)
                });
            }
            let (model, encoder) = setup.load_model_and_encoder().map_err(|e| e.to_string())?;
            state.send_modify(|s| {
                s.message = "reading templates".into();
                s.download = None;
            });
            let built = setup
                .guard_on(model, encoder, &setup.prompts)
                .map_err(|e| e.to_string())?;
            *problems.write().unwrap_or_else(|p| p.into_inner()) = describe(&built.problems);
            Ok(built.guard)
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
                        s.status = LoadStatus::Ready;
                        s.model = info.id;
                        s.device = info.device;
                        s.weights = info.weight_format;
                        s.synthetic = info.synthetic;
                        s.message = String::new();
                        s.load_ms = Some(started.elapsed().as_secs_f64() * 1e3);
                        tracing::info!(load_ms = s.load_ms, "model ready");
                    }
                    ModelStatus::Failed(message) => {
                        s.status = LoadStatus::Failed;
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
        let settled = state.wait_for(|s| s.status != LoadStatus::Loading);
        let _ = tokio::time::timeout(timeout, settled).await;
        self.model_state()
    }
}

/// Where the worker gets its model (the settings are read on the caller's thread).
enum Source {
    Local(String),
    Server(String),
    Loaded(Arc<dyn LanguageModel>),
}

/// Tells the window how a download (of the model or the encoder) goes.
fn download_report(
    state: &Arc<watch::Sender<ModelState>>,
    events: &Arc<dyn EventSink>,
) -> DownloadReport {
    let state = state.clone();
    let events = events.clone();
    DownloadReport::Listener(Arc::new(move |p: &DownloadProgress| {
        state.send_modify(|s| {
            s.message = format!("downloading {}", p.file);
            s.download = Some(Download {
                file: p.file.clone(),
                downloaded: p.downloaded,
                total: p.total,
            });
        });
        events.emit(ConsoleEvent::Model(state.borrow().clone()));
    }))
}
