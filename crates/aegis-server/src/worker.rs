//! The model's own thread. Requests reach it through a bounded queue with a reply channel; a full
//! queue is refused at once ("busy") instead of growing, and a request whose client has gone is
//! skipped instead of computed.

use std::sync::{Arc, RwLock};

use aegis_guard::{Guard, GuardError, Verdict};
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

struct Job {
    text: String,
    reply: oneshot::Sender<Result<Verdict, GuardError>>,
}

#[derive(Clone)]
pub struct Worker {
    jobs: mpsc::Sender<Job>,
    queue: usize,
    status: Arc<RwLock<ModelStatus>>,
    guard: Arc<RwLock<Option<Arc<Guard>>>>,
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
        let status = Arc::new(RwLock::new(ModelStatus::Loading));
        let shared_guard = Arc::new(RwLock::new(None));
        let worker = Self {
            jobs,
            queue,
            status: status.clone(),
            guard: shared_guard.clone(),
        };
        let spawned = std::thread::Builder::new()
            .name("aegis-model".into())
            .spawn(move || {
                let guard = match load() {
                    Ok(guard) => Arc::new(guard),
                    Err(message) => {
                        tracing::error!(%message, "model failed to load");
                        set(&status, ModelStatus::Failed(message));
                        return;
                    }
                };
                let info = guard.model().info().clone();
                *shared_guard.write().unwrap_or_else(|p| p.into_inner()) = Some(guard.clone());
                set(
                    &status,
                    ModelStatus::Ready {
                        model: info.id,
                        device: info.device,
                    },
                );
                while let Some(job) = receiver.blocking_recv() {
                    if job.reply.is_closed() {
                        continue; // The client gave up; spend nothing on it.
                    }
                    let _ = job.reply.send(guard.check(&job.text));
                }
            });
        if let Err(e) = spawned {
            set(
                &worker.status,
                ModelStatus::Failed(format!("cannot start the model thread: {e}")),
            );
        }
        worker
    }

    pub fn status(&self) -> ModelStatus {
        self.status
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The loaded guard, once ready.
    pub fn guard(&self) -> Option<Arc<Guard>> {
        self.guard.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub async fn check(&self, text: String) -> Result<Verdict, WorkerError> {
        match self.status() {
            ModelStatus::Loading => return Err(WorkerError::Loading),
            ModelStatus::Failed(message) => return Err(WorkerError::Failed(message)),
            ModelStatus::Ready { .. } => {}
        }
        let (reply, answer) = oneshot::channel();
        self.jobs
            .try_send(Job { text, reply })
            .map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => WorkerError::Busy(self.queue),
                mpsc::error::TrySendError::Closed(_) => WorkerError::Stopped,
            })?;
        Ok(answer.await.map_err(|_| WorkerError::Stopped)??)
    }
}

fn set(status: &RwLock<ModelStatus>, value: ModelStatus) {
    *status.write().unwrap_or_else(|p| p.into_inner()) = value;
}
