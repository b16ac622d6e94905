//! The model's own thread. Requests reach it through a bounded queue with a reply channel; a full
//! queue is refused at once ("busy") instead of growing, and a request whose client has gone is
//! skipped instead of computed. The guard it runs can be swapped while it serves (templates
//! edited live); every verdict comes back with the templates that produced it, so history records
//! the right versions even when a swap lands between two requests.
//!
//! Dynamic batching: whatever is already queued when the worker turns to it (HTTP requests, an
//! import, the window) is scored in one batch, up to a bound on batch text. A lone request never
//! waits for company. Under load it may wait a little (see [`GATHER_WAIT`]): clients answered
//! together come back together, a few microseconds apart.

use std::ops::ControlFlow;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use aegis_engine::ModelInfo;
use aegis_guard::{fitting_answer_prompt, Guard, GuardError, GuardInput, Turn, Verdict};
use aegis_store::TemplateContent;
use tokio::sync::{mpsc, oneshot, watch};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelStatus {
    Loading,
    /// Serving, on this model (its id, device, weight format, and whether it is synthetic).
    Ready(ModelInfo),
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
    /// Checking this input panicked inside the model thread. The thread caught it and goes on;
    /// inputs batched with it were checked again on their own.
    #[error("checking this message failed inside the model thread ({0}); the guard goes on")]
    Panicked(String),
    #[error(transparent)]
    Guard(#[from] GuardError),
}

impl WorkerError {
    pub fn kind(&self) -> aegis_guard::ErrorKind {
        use aegis_guard::ErrorKind;
        match self {
            Self::Busy(_) => ErrorKind::Busy,
            Self::Loading => ErrorKind::Loading,
            Self::Failed(_) | Self::Stopped | Self::Panicked(_) => ErrorKind::Model,
            Self::Guard(e) => e.kind(),
        }
    }
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

/// What the model thread does for a caller: check a message, or write an answer.
enum Work {
    Check(Job),
    Answer(AnswerJob),
}

/// Writing a prototype's answer after `turns`. It runs on the model thread like a check, so
/// answers are bounded by the queue (and by [`MAX_QUEUED_ANSWERS`]) instead of each taking a
/// thread and a cache of its own, and it stops when its client goes away.
struct AnswerJob {
    turns: Vec<Turn>,
    max_tokens: usize,
    reply: oneshot::Sender<Result<String, WorkerError>>,
    /// Frees its place among the queued answers however the job ends.
    _place: AnswerPlace,
}

/// Answers waiting or being written at once; more are refused as busy. An answer holds the model
/// for seconds, so a few queued already mean a long wait for the next.
pub const MAX_QUEUED_ANSWERS: usize = 4;

struct AnswerPlace(Arc<AtomicUsize>);

impl Drop for AnswerPlace {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

struct Job {
    input: GuardInput,
    /// Runs this guard instead of the current one (a template being tried before it is saved).
    guard: Option<LoadedGuard>,
    reply: oneshot::Sender<Result<Checked, WorkerError>>,
}

impl Job {
    fn answer(self, loaded: &LoadedGuard, verdict: Result<Verdict, GuardError>) {
        let _ = self.reply.send(
            verdict
                .map(|verdict| Checked {
                    verdict,
                    templates: loaded.templates.clone(),
                })
                .map_err(WorkerError::from),
        );
    }

    /// What the job adds to a batch's text: the turn and the context read with it.
    fn text_bytes(&self) -> usize {
        let context: usize = self.input.context.iter().map(|t| t.content.len()).sum();
        self.input.turn.content.len() + context
    }
}

/// At most this many messages share one batch.
const MAX_BATCH_MESSAGES: usize = 32;
/// At most this much message text (about 4,000 tokens) shares one batch, so a batch's latency
/// stays near that of its longest member.
const MAX_BATCH_TEXT_BYTES: usize = 16 * 1024;
/// When the last batch held several messages, the worker waits up to this long for as many again
/// before it starts. The clients a batch answered send their next requests microseconds apart; a
/// batch started on the first of them leaves the rest to a second, half-empty one (on an H100, 32
/// clients got 1,061 verdicts a second where full batches of 32 gave 1,712). A lone client (last
/// batch of one) never waits; the wait is small beside any verdict (7 ms on that GPU).
const GATHER_WAIT: Duration = Duration::from_micros(1500);
/// How often the gathering worker looks at the queue again.
const GATHER_POLL: Duration = Duration::from_micros(50);

#[derive(Clone)]
pub struct Worker {
    jobs: mpsc::Sender<Work>,
    queue: usize,
    answers: Arc<AtomicUsize>,
    /// Watched, so callers wait for the model without polling.
    status: Arc<watch::Sender<ModelStatus>>,
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
        let (jobs, mut receiver) = mpsc::channel::<Work>(queue);
        let worker = Self {
            jobs,
            queue,
            answers: Arc::new(AtomicUsize::new(0)),
            status: Arc::new(watch::Sender::new(ModelStatus::Loading)),
            current: Arc::new(RwLock::new(None)),
        };
        let this = worker.clone();
        let spawned = std::thread::Builder::new()
            .name("aegis-model".into())
            .spawn(move || {
                // Whatever ends this thread, /health and every caller hear that it is down.
                let _down = SaysWhenDown(this.clone());
                let guard = match catch_unwind(AssertUnwindSafe(load)) {
                    Ok(Ok(guard)) => guard,
                    Ok(Err(message)) => {
                        tracing::error!(%message, "model failed to load");
                        this.set_status(ModelStatus::Failed(message));
                        return;
                    }
                    Err(panic) => {
                        let message =
                            format!("loading the model panicked: {}", panic_message(&*panic));
                        tracing::error!(%message);
                        this.set_status(ModelStatus::Failed(message));
                        return;
                    }
                };
                let info = guard.model().info().clone();
                this.replace_guard(guard);
                this.set_status(ModelStatus::Ready(info));
                let mut held_over = None;
                let mut last_batch = 1;
                while let Some(first) = held_over.take().or_else(|| receiver.blocking_recv()) {
                    let first = match first {
                        Work::Check(job) => job,
                        Work::Answer(job) => {
                            this.write_answer(job);
                            continue;
                        }
                    };
                    let mut batch = vec![first];
                    let mut text_bytes = batch[0].text_bytes();
                    let gather_until = Instant::now() + GATHER_WAIT;
                    while batch.len() < MAX_BATCH_MESSAGES {
                        match receiver.try_recv() {
                            Ok(Work::Check(next))
                                if text_bytes + next.text_bytes() <= MAX_BATCH_TEXT_BYTES =>
                            {
                                text_bytes += next.text_bytes();
                                batch.push(next);
                            }
                            // Too much text for this batch, or an answer: next, on its own.
                            Ok(other) => {
                                held_over = Some(other);
                                break;
                            }
                            Err(mpsc::error::TryRecvError::Empty)
                                if batch.len() < last_batch && Instant::now() < gather_until =>
                            {
                                std::thread::sleep(GATHER_POLL);
                            }
                            Err(_) => break,
                        }
                    }
                    last_batch = batch.len();
                    this.run_batch(batch);
                }
            });
        if let Err(e) = spawned {
            worker.set_status(ModelStatus::Failed(format!(
                "cannot start the model thread: {e}"
            )));
        }
        worker
    }

    /// Checks a drained batch: jobs whose clients have gone are dropped, the rest are grouped by
    /// the guard they run and each group is scored as one batch.
    fn run_batch(&self, jobs: Vec<Job>) {
        let mut groups: Vec<(LoadedGuard, Vec<Job>)> = Vec::new();
        for job in jobs {
            if job.reply.is_closed() {
                continue; // The client gave up; spend nothing on it.
            }
            let Some(loaded) = job.guard.clone().or_else(|| self.loaded()) else {
                continue;
            };
            match groups
                .iter_mut()
                .find(|(g, _)| Arc::ptr_eq(&g.guard, &loaded.guard))
            {
                Some((_, group)) => group.push(job),
                None => groups.push((loaded, vec![job])),
            }
        }
        for (loaded, jobs) in groups {
            let inputs: Vec<GuardInput> = jobs.iter().map(|j| j.input.clone()).collect();
            let started = Instant::now();
            match catch_unwind(AssertUnwindSafe(|| loaded.guard.check_inputs(&inputs))) {
                Ok(verdicts) => {
                    // Batch sizes and times under load say whether the model thread is the limit.
                    tracing::debug!(
                        messages = jobs.len(),
                        ms = started.elapsed().as_secs_f64() * 1e3,
                        "scored a batch"
                    );
                    for (job, verdict) in jobs.into_iter().zip(verdicts) {
                        job.answer(&loaded, verdict);
                    }
                }
                Err(panic) => {
                    tracing::error!(
                        messages = jobs.len(),
                        panic = panic_message(&*panic),
                        "a batch panicked in the model thread; checking its messages one by one"
                    );
                    // What the panic left half-written in the cache must not be reused.
                    loaded.guard.model().clear_prefix_cache();
                    for job in jobs {
                        self.run_alone(&loaded, job);
                    }
                }
            }
        }
    }

    /// One job on its own, after its batch panicked: only the input that panics fails.
    fn run_alone(&self, loaded: &LoadedGuard, job: Job) {
        let input = std::slice::from_ref(&job.input);
        match catch_unwind(AssertUnwindSafe(|| loaded.guard.check_inputs(input))) {
            Ok(mut verdicts) => {
                let verdict = verdicts.pop().unwrap_or(Err(GuardError::EmptyText));
                job.answer(loaded, verdict);
            }
            Err(panic) => {
                let message = panic_message(&*panic);
                tracing::error!(panic = %message, "checking one message panicked; the worker goes on");
                loaded.guard.model().clear_prefix_cache();
                let _ = job.reply.send(Err(WorkerError::Panicked(message)));
            }
        }
    }

    /// Writes an answer, trimmed to the model's context, and stops as soon as its client is gone.
    fn write_answer(&self, job: AnswerJob) {
        if job.reply.is_closed() {
            return;
        }
        let Some(loaded) = self.loaded() else {
            let _ = job.reply.send(Err(WorkerError::Loading));
            return;
        };
        let model = loaded.guard.model();
        let reply = &job.reply;
        let written = catch_unwind(AssertUnwindSafe(|| {
            let prompt = fitting_answer_prompt(model.as_ref(), &job.turns, job.max_tokens)?;
            let mut stopped = false;
            let text = model.generate(&prompt, job.max_tokens, &mut |_| {
                stopped = reply.is_closed();
                if stopped {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            })?;
            if stopped {
                tracing::info!("an answer's client went away: generation stopped");
            }
            Ok::<_, GuardError>(text)
        }));
        let answer = match written {
            Ok(written) => written.map_err(WorkerError::from),
            Err(panic) => {
                let message = panic_message(&*panic);
                tracing::error!(panic = %message, "writing an answer panicked; the worker goes on");
                Err(WorkerError::Panicked(message))
            }
        };
        let _ = job.reply.send(answer);
    }

    /// Messages waiting for the model now (at most the queue's size).
    pub fn queued(&self) -> usize {
        self.queue.saturating_sub(self.jobs.capacity())
    }

    /// How many messages may wait before new ones are refused as busy.
    pub fn queue_size(&self) -> usize {
        self.queue
    }

    pub fn status(&self) -> ModelStatus {
        self.status.borrow().clone()
    }

    /// Waits until the model is ready or has failed, and says which.
    pub async fn settled(&self) -> ModelStatus {
        let mut status = self.status.subscribe();
        let settled = status
            .wait_for(|s| !matches!(s, ModelStatus::Loading))
            .await
            .map(|s| s.clone());
        // The sender lives as long as `self`, so waiting cannot outlive it.
        settled.unwrap_or(ModelStatus::Failed("the model worker has stopped".into()))
    }

    fn set_status(&self, value: ModelStatus) {
        self.status.send_replace(value);
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

    /// Every request queued after this call runs `guard` (on the same model). Cached template
    /// openings of the old guard are dropped.
    pub fn replace_guard(&self, guard: Guard) {
        guard.model().clear_prefix_cache();
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Some(LoadedGuard::new(guard));
    }

    /// Checks a message (or a conversation's turn) now or answers at once why not: the model is
    /// loading or failed, or the queue is full ("busy"). What HTTP clients and the window's typed
    /// checks want.
    pub async fn check(&self, input: impl Into<GuardInput>) -> Result<Checked, WorkerError> {
        self.submit(input.into(), None, Admission::Immediate).await
    }

    /// `check` on `guard` instead of the current one, in the same queue (the model has one
    /// thread).
    pub async fn check_with(
        &self,
        guard: LoadedGuard,
        input: impl Into<GuardInput>,
    ) -> Result<Checked, WorkerError> {
        self.submit(input.into(), Some(guard), Admission::Immediate)
            .await
    }

    /// `check` for callers inside the app (imports, evaluations): waits for the model to load
    /// and for room in the queue instead of answering "loading" or "busy".
    pub async fn check_waiting(
        &self,
        input: impl Into<GuardInput>,
        guard: Option<LoadedGuard>,
    ) -> Result<Checked, WorkerError> {
        self.submit(input.into(), guard, Admission::Waiting).await
    }

    /// Writes the model's answer after `turns` (the user's turn last), at most `max_tokens`, on
    /// the model thread, in the same queue as checks; answers at once when the model is not
    /// ready or [`MAX_QUEUED_ANSWERS`] are already waiting ("busy"). Dropping the future stops
    /// the generation at its next token.
    pub async fn answer(&self, turns: Vec<Turn>, max_tokens: usize) -> Result<String, WorkerError> {
        ready(self.status())?;
        if self.answers.fetch_add(1, Ordering::AcqRel) >= MAX_QUEUED_ANSWERS {
            self.answers.fetch_sub(1, Ordering::AcqRel);
            return Err(WorkerError::Busy(MAX_QUEUED_ANSWERS));
        }
        let place = AnswerPlace(self.answers.clone());
        let (reply, answer) = oneshot::channel();
        let job = AnswerJob {
            turns,
            max_tokens,
            reply,
            _place: place,
        };
        self.enqueue_now(Work::Answer(job))?;
        answer.await.map_err(|_| WorkerError::Stopped)?
    }

    /// Queues `work` if there is room now; a full queue is "busy".
    fn enqueue_now(&self, work: Work) -> Result<(), WorkerError> {
        self.jobs.try_send(work).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => WorkerError::Busy(self.queue),
            mpsc::error::TrySendError::Closed(_) => WorkerError::Stopped,
        })
    }

    async fn submit(
        &self,
        input: GuardInput,
        guard: Option<LoadedGuard>,
        admission: Admission,
    ) -> Result<Checked, WorkerError> {
        ready(match admission {
            Admission::Immediate => self.status(),
            Admission::Waiting => self.settled().await,
        })?;
        let (reply, answer) = oneshot::channel();
        let job = Job {
            input,
            guard,
            reply,
        };
        match admission {
            Admission::Immediate => self.enqueue_now(Work::Check(job))?,
            Admission::Waiting => self
                .jobs
                .send(Work::Check(job))
                .await
                .map_err(|_| WorkerError::Stopped)?,
        }
        answer.await.map_err(|_| WorkerError::Stopped)?
    }
}

/// Work can be queued only on a model that is ready; otherwise, why not.
fn ready(status: ModelStatus) -> Result<(), WorkerError> {
    match status {
        ModelStatus::Loading => Err(WorkerError::Loading),
        ModelStatus::Failed(message) => Err(WorkerError::Failed(message)),
        ModelStatus::Ready(_) => Ok(()),
    }
}

/// Marks the worker down when its thread ends other than by the worker being dropped (a panic the
/// batch guards did not catch), so `/health` and callers do not wait on a thread that is gone.
struct SaysWhenDown(Worker);

impl Drop for SaysWhenDown {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.set_status(ModelStatus::Failed(
                "the model thread stopped after a panic; restart the server".into(),
            ));
        }
    }
}

/// The text a panic was raised with.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// How a request is let into the queue.
#[derive(Debug, Clone, Copy)]
enum Admission {
    /// Now or never: "loading" and "busy" are answers.
    Immediate,
    /// After the model has loaded and when the queue has room.
    Waiting,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_failed_load_settles_and_waiting_callers_hear_why() {
        let worker = Worker::start(1, || Err("no weights here".to_string()));
        assert_eq!(
            worker.settled().await,
            ModelStatus::Failed("no weights here".into())
        );
        let refused = worker
            .check_waiting("halo", None)
            .await
            .expect_err("no model");
        assert!(matches!(refused, WorkerError::Failed(m) if m == "no weights here"));
    }

    #[tokio::test]
    async fn a_panic_fails_only_the_message_that_caused_it_and_the_worker_goes_on() {
        use aegis_engine::testing::FakeModel;
        use aegis_guard::{Guard, Validator};
        let mut model = FakeModel::new(vec![]);
        model.panics_on = Some("KABOOM");
        let validator = Validator::parse(
            std::path::Path::new("spam.txt"),
            "---\nname: Spam\nrejection:\n  id: Maaf.\n  en: Sorry.\n---\nMessage: {{message}}\nIs it spam?\n",
        )
        .expect("template");
        let guard = Guard::new(std::sync::Arc::new(model), vec![validator]);
        let worker = Worker::start(8, move || Ok(guard));
        worker.settled().await;
        // Queued together, so the worker usually takes them as one batch; either way only the
        // message that panics may fail.
        let (calm, boom, also_calm) = tokio::join!(
            worker.check("halo apa kabar"),
            worker.check("KABOOM"),
            worker.check("selamat pagi"),
        );
        assert!(calm.is_ok(), "{calm:?}");
        assert!(also_calm.is_ok(), "{also_calm:?}");
        assert!(
            matches!(&boom, Err(WorkerError::Panicked(m)) if m.contains("KABOOM")),
            "{boom:?}"
        );
        assert!(matches!(worker.status(), ModelStatus::Ready(_)));
        assert!(worker.check("lagi").await.is_ok());
    }

    #[tokio::test]
    async fn a_load_that_panics_is_a_failed_model_not_a_hang() {
        let worker = Worker::start(1, || panic!("weights are upside down"));
        let status = worker.settled().await;
        assert!(
            matches!(&status, ModelStatus::Failed(m) if m.contains("upside down")),
            "{status:?}"
        );
    }
}
