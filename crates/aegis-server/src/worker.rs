//! The model's own thread. Requests reach it through a bounded queue with a reply channel; a full
//! queue is refused at once ("busy") instead of growing, and a request whose client has gone is
//! skipped instead of computed. The guard it runs can be swapped while it serves (templates
//! edited live); every verdict comes back with the templates that produced it, so history records
//! the right versions even when a swap lands between two requests.

use std::sync::{Arc, RwLock};

use aegis_guard::{Guard, GuardError, Verdict};
use aegis_store::TemplateContent;
use tokio::sync::{mpsc, oneshot};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelStatus {
    Loading,
    Ready { model: String, device: String },
    Failed(String),
}

#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("the guard is busy: {0} requests are already queued; retry shortly")]
    Busy(usize),
    #[error("the model is still loading; retry shortly")]
    Loading,
    #[error("the model failed to load: {0}")]
    Failed(String),
    #[error("the model worker has stopped")]
    Stopped,
    #[error(transparent)]
    Guard(#[from] GuardError),
}

/// A guard and its templates as history records them, built once per guard.
#[derive(Debug, Clone)]
pub struct LoadedGuard {
    pub guard: Arc<Guard>,
    pub templates: Arc<[TemplateContent]>,
}

impl LoadedGuard {
    pub fn new(guard: Guard) -> Self {
        let templates = guard.validators().iter().map(Into::into).collect();
        Self {
            guard: Arc::new(guard),
            templates,
        }
    }
}

/// A verdict and the templates of the guard that produced it.
#[derive(Debug, Clone)]
pub struct Checked {
    pub verdict: Verdict,
    pub templates: Arc<[TemplateContent]>,
}

struct Job {
    text: String,
    /// Runs this guard instead of the current one (a template being tried before it is saved).
    guard: Option<LoadedGuard>,
    reply: oneshot::Sender<Result<Checked, GuardError>>,
}

#[derive(Clone)]
pub struct Worker {
    jobs: mpsc::Sender<Job>,
    queue: usize,
    status: Arc<RwLock<ModelStatus>>,
    current: Arc<RwLock<Option<LoadedGuard>>>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("queue", &self.queue)
            .field("status", &self.status())
            .finish()
    }
}

impl Worker {
    /// Starts the worker thread; `load` builds the guard on it, so the server can answer
    /// `/health` ("loading") while the model loads.
    pub fn start<F>(queue: usize, load: F) -> Self
    where
        F: FnOnce() -> Result<Guard, String> + Send + 'static,
    {
        let queue = queue.max(1);
        let (jobs, mut receiver) = mpsc::channel::<Job>(queue);
        let worker = Self {
            jobs,
            queue,
            status: Arc::new(RwLock::new(ModelStatus::Loading)),
            current: Arc::new(RwLock::new(None)),
        };
        let this = worker.clone();
        let spawned = std::thread::Builder::new()
            .name("aegis-model".into())
            .spawn(move || {
                let guard = match load() {
                    Ok(guard) => guard,
                    Err(message) => {
                        tracing::error!(%message, "model failed to load");
                        this.set_status(ModelStatus::Failed(message));
                        return;
                    }
                };
                let info = guard.model().info().clone();
                this.replace_guard(guard);
                this.set_status(ModelStatus::Ready {
                    model: info.id,
                    device: info.device,
                });
                while let Some(job) = receiver.blocking_recv() {
                    if job.reply.is_closed() {
                        continue; // The client gave up; spend nothing on it.
                    }
                    let Some(loaded) = job.guard.or_else(|| this.loaded()) else {
                        continue;
                    };
                    let checked = loaded.guard.check(&job.text).map(|verdict| Checked {
                        verdict,
                        templates: loaded.templates.clone(),
                    });
                    let _ = job.reply.send(checked);
                }
            });
        if let Err(e) = spawned {
            worker.set_status(ModelStatus::Failed(format!(
                "cannot start the model thread: {e}"
            )));
        }
        worker
    }

    pub fn status(&self) -> ModelStatus {
        self.status
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn set_status(&self, value: ModelStatus) {
        *self.status.write().unwrap_or_else(|p| p.into_inner()) = value;
    }

    /// The guard in use, once the model is ready.
    pub fn guard(&self) -> Option<Arc<Guard>> {
        self.loaded().map(|l| l.guard)
    }

    pub fn loaded(&self) -> Option<LoadedGuard> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Every request queued after this call runs `guard` (on the same model).
    pub fn replace_guard(&self, guard: Guard) {
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Some(LoadedGuard::new(guard));
    }

    pub async fn check(&self, text: String) -> Result<Checked, WorkerError> {
        self.submit(text, None).await
    }

    /// Runs `guard` instead of the current one, in the same queue (the model has one thread).
    pub async fn check_with(
        &self,
        guard: LoadedGuard,
        text: String,
    ) -> Result<Checked, WorkerError> {
        self.submit(text, Some(guard)).await
    }

    async fn submit(
        &self,
        text: String,
        guard: Option<LoadedGuard>,
    ) -> Result<Checked, WorkerError> {
        match self.status() {
            ModelStatus::Loading => return Err(WorkerError::Loading),
            ModelStatus::Failed(message) => return Err(WorkerError::Failed(message)),
            ModelStatus::Ready { .. } => {}
        }
        let (reply, answer) = oneshot::channel();
        self.jobs
            .try_send(Job { text, guard, reply })
            .map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => WorkerError::Busy(self.queue),
                mpsc::error::TrySendError::Closed(_) => WorkerError::Stopped,
            })?;
        Ok(answer.await.map_err(|_| WorkerError::Stopped)??)
    }
}
