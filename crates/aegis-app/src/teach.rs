//! The Teach view's work: a validator's examples (marked on verdicts, typed, settled by reviews), a
//! head trained on them beside the shipped data with progress and cancel, applied as a version
//! and reverted; and a new validator made from a policy and its examples.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use aegis_engine::{ChatFormat, Speaker};
use aegis_guard::{FeatureCache, LabelledMessage, ScoreSource};
use aegis_heads::Head;
use aegis_store::{ExampleOrigin, HeadVersion, MemberRole, StoredExample};
/// A message to label next, as the Teach view's queue shows it.
pub use aegis_teach::Suggestion;
use aegis_teach::{FitRequest, HeadFlip, Progress, TeachFigures};
use serde::{Deserialize, Serialize};

use crate::console::{lock, Console, ConsoleEvent};
use crate::error::ConsoleError;
use crate::templates;

/// Positive examples a new validator needs before it can be created.
pub const MIN_NEW_POSITIVES: usize = 20;
/// The most messages one request for suggestions returns: a batch an author labels before
/// training again.
pub const MAX_SUGGESTIONS: usize = 100;
/// Rows of the latest evaluation run whose verdicts a new head's flips are looked for in.
const EVAL_ROWS_FOR_FLIPS: usize = 2_000;

/// One validator as the Teach view lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct TeachValidator {
    pub key: String,
    pub name: String,
    pub threshold: f32,
    /// "head" or "prompt": what decides it now.
    pub scored_by: String,
    pub examples: usize,
    pub should_fail: usize,
    pub contradicted: usize,
    /// A trained head waiting to be applied.
    pub pending: bool,
}

/// A trained head's figures and flips, before Apply.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct TrainReport {
    pub figures: TeachFigures,
    pub flips: Vec<HeadFlip>,
}

/// An applied or reverted head.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct AppliedHead {
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub version: i64,
    pub path: String,
    /// The threshold written into the template with it, when it changed.
    pub threshold: Option<f64>,
    /// Readings of the head it replaced, kept because the new head has none (toxic's contempt).
    pub kept_readings: Vec<String>,
}

/// What the "New validator" form sends.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct NewValidator {
    pub key: String,
    pub name: String,
    /// The policy, in the prompt's words: it decides where the prompt does, and documents the
    /// validator.
    pub policy: String,
    pub rejection_id: String,
    pub rejection_en: String,
    /// Messages that violate the policy, at least [`MIN_NEW_POSITIVES`].
    pub positives: Vec<String>,
    /// Near misses: messages on the same topic that do not violate it (news, questions, help
    /// for someone else). Without them the head learns the topic, not the policy.
    #[serde(default)]
    pub near_misses: Vec<String>,
}

impl Console {
    /// Every validator with its examples' counts and what decides it.
    pub async fn teach_validators(&self) -> Result<Vec<TeachValidator>, ConsoleError> {
        let examples = self.store().examples(None).await?;
        let pending = lock(&self.trained).clone();
        let guard = self.loaded_guard()?;
        Ok(guard
            .validators()
            .iter()
            .zip(guard.heads())
            .map(|(v, head)| {
                let own: Vec<&StoredExample> =
                    examples.iter().filter(|e| e.validator == v.key).collect();
                TeachValidator {
                    key: v.key.clone(),
                    name: v.name.clone(),
                    threshold: v.threshold,
                    scored_by: ScoreSource::deciding(head.is_some()).as_str().into(),
                    examples: own.len(),
                    should_fail: own.iter().filter(|e| e.violates).count(),
                    contradicted: own.iter().filter(|e| e.contradicted).count(),
                    pending: pending.contains_key(&v.key),
                }
            })
            .collect())
    }

    /// Writes a new validator's template and teaches it its positives; it decides by prompt
    /// until a head is trained and applied. In a team it is an author's work, refused before the
    /// template is written.
    pub async fn create_validator(&self, new: NewValidator) -> Result<String, ConsoleError> {
        self.store()
            .require_role(&self.actor(), MemberRole::Author, "create validators")
            .await?;
        let dir = self.prompts_dir()?;
        let key = new.key.trim().to_string();
        let path = templates::template_path(&dir, &key)?;
        if path.exists() {
            return Err(ConsoleError::Invalid(format!(
                "a validator called {key:?} exists already"
            )));
        }
        for (field, value) in [
            ("a name", &new.name),
            ("a policy", &new.policy),
            ("an Indonesian rejection message", &new.rejection_id),
            ("an English rejection message", &new.rejection_en),
        ] {
            if value.trim().is_empty() {
                return Err(ConsoleError::Invalid(format!(
                    "a new validator needs {field}"
                )));
            }
        }
        let distinct = |texts: &[String]| {
            let mut kept: Vec<String> = texts
                .iter()
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty())
                .collect();
            kept.sort_unstable();
            kept.dedup();
            kept
        };
        let positives = distinct(&new.positives);
        let near_misses = distinct(&new.near_misses);
        if let Some(both) = near_misses.iter().find(|t| positives.contains(t)) {
            return Err(ConsoleError::Invalid(format!(
                "{both:?} is both a message that violates the policy and one that does not"
            )));
        }
        if positives.len() < MIN_NEW_POSITIVES {
            return Err(ConsoleError::Invalid(format!(
                "a new validator needs at least {MIN_NEW_POSITIVES} different messages that violate its policy; there are {}",
                positives.len()
            )));
        }
        // The prompt is written in the loaded model's chat markup (the shipped family's while it
        // loads).
        let format = self
            .loaded_guard()
            .map(|guard| guard.model().info().chat_format)
            .unwrap_or_default();
        let content = new_template(&new, self.next_order()?, format);
        // Written (validated, atomically, versioned) and loaded before its examples go in, so an
        // example never names a validator that does not exist.
        self.save_template(&key, &content).await?;
        for (texts, violates) in [(positives, true), (near_misses, false)] {
            for text in texts {
                self.add_example(&key, &text, violates, ExampleOrigin::Manual, None)
                    .await?;
            }
        }
        Ok(key)
    }

    fn next_order(&self) -> Result<i64, ConsoleError> {
        let guard = self.worker()?.guard();
        Ok(guard
            .map(|g| g.validators().iter().map(|v| v.order).max().unwrap_or(0))
            .unwrap_or(0)
            + 1)
    }

    /// The guard checks run on now; an error while the model loads.
    fn loaded_guard(&self) -> Result<Arc<aegis_guard::Guard>, ConsoleError> {
        Ok(self
            .worker()?
            .guard()
            .ok_or(aegis_runtime::WorkerError::Loading)?)
    }

    pub(crate) fn known_validator(&self, key: &str) -> Result<(), ConsoleError> {
        let guard = self.loaded_guard()?;
        if guard.validator(key).is_some() {
            Ok(())
        } else {
            Err(ConsoleError::Invalid(format!(
                "no validator is called {key:?}"
            )))
        }
    }

    /// Trains `validator`'s head on the labelled files beside the heads and its examples
    /// (features cached, so only new texts are encoded), measures it and lists what it would
    /// flip; Apply makes it live. Progress goes out as `Train` events; `cancel` with the same id
    /// stops it.
    pub async fn train(
        &self,
        train_id: String,
        validator: String,
    ) -> Result<TrainReport, ConsoleError> {
        let guard = self.loaded_guard()?;
        let slot = guard
            .validators()
            .iter()
            .position(|v| v.key == validator)
            .ok_or_else(|| {
                ConsoleError::Invalid(format!("no validator is called {validator:?}"))
            })?;
        let dir = self.prompts_dir()?;
        let mut taught = aegis_teach::taught_rows(self.store().examples(Some(&validator)).await?);
        // A reviewer's agree or overturn is an example too: the label the review settled on.
        taught.extend(
            self.store()
                .reviewed_examples(&Default::default())
                .await?
                .into_iter()
                .map(|r| r.into_labelled())
                .filter_map(|mut m| {
                    let label = m.label(&validator)?;
                    m.labels = [(validator.clone(), Some(label))].into();
                    Some(m)
                }),
        );
        let flip_candidates = self.flip_candidates(&dir).await?;
        let current = guard.heads()[slot].clone();

        let cancel = Arc::new(AtomicBool::new(false));
        lock(&self.running).insert(train_id.clone(), cancel.clone());
        let events = self.events.clone();
        let id = train_id.clone();
        let key = validator.clone();
        let fitted = tokio::task::spawn_blocking(move || {
            let files = aegis_teach::training_files(&dir);
            let data = aegis_teach::read_messages(&files.training, &[])?;
            let cache = FeatureCache::new(aegis_teach::feature_cache_dir());
            let report = move |stage: &str, done: usize, total: usize| {
                events.emit(ConsoleEvent::Train {
                    train_id: id.clone(),
                    stage: stage.to_string(),
                    done,
                    total,
                });
            };
            let progress = Progress {
                report: &report,
                cancel: &cancel,
            };
            let request = FitRequest {
                key: &key,
                data,
                taught,
                flip_candidates,
                current,
                cache: Some(&cache),
                benign_budget: aegis_teach::BENIGN_BUDGET,
            };
            aegis_teach::fit_head(&guard, request, &progress)
        })
        .await;
        lock(&self.running).remove(&train_id);
        let taught = fitted.map_err(|e| ConsoleError::Invalid(e.to_string()))??;
        tracing::info!(
            validator,
            read_s = taught.figures.read_seconds,
            train_s = taught.figures.train_seconds,
            "trained a head"
        );
        lock(&self.trained).insert(validator, taught.head);
        Ok(TrainReport {
            figures: taught.figures,
            flips: taught.flips,
        })
    }

    /// The messages to label next for `validator`, scored by its trained head when one waits to
    /// be applied (the doubts the next labels settle are that head's), else its live head. The
    /// pool is history, the benign messages among the training files (for a new validator they
    /// are negatives no one chose, where its false positives hide) and the author's `files`.
    pub async fn suggest_examples(
        &self,
        validator: String,
        files: Vec<PathBuf>,
        wanted: usize,
    ) -> Result<Vec<Suggestion>, ConsoleError> {
        self.known_validator(&validator)?;
        let guard = self.loaded_guard()?;
        let dir = self.prompts_dir()?;
        let mut pool = Vec::new();
        for path in &files {
            let file = aegis_import::MessageFile::read(path, None)?;
            pool.extend(file.texts_from());
        }
        let benign: Vec<PathBuf> = aegis_teach::training_files(&dir)
            .training
            .into_iter()
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("benign"))
            })
            .collect();
        pool.extend(
            aegis_teach::read_messages(&benign, &[])?
                .into_iter()
                .map(|m| (m.text, "benign pool".to_string())),
        );
        let pool = aegis_teach::suggestion_pool(self.store(), &dir, &validator, pool, true).await?;
        if pool.is_empty() {
            return Err(ConsoleError::Invalid(
                "no messages to choose from: point at a file of messages, or check some first"
                    .into(),
            ));
        }
        let trained = lock(&self.trained).get(&validator).cloned();
        let suggested = tokio::task::spawn_blocking(move || {
            let cache = FeatureCache::new(aegis_teach::feature_cache_dir());
            let report = |_: &str, _: usize, _: usize| {};
            let progress = Progress {
                report: &report,
                cancel: &AtomicBool::new(false),
            };
            let request = aegis_teach::SuggestRequest {
                key: &validator,
                pool,
                cache: Some(&cache),
                wanted: wanted.clamp(1, MAX_SUGGESTIONS),
                head: trained.as_ref(),
            };
            aegis_teach::suggest(&guard, request, &progress)
        })
        .await
        .map_err(|e| ConsoleError::Invalid(e.to_string()))??;
        Ok(suggested)
    }

    /// Texts never trained on whose verdicts a new head may change: the benign check beside the
    /// heads and the latest evaluation run.
    async fn flip_candidates(
        &self,
        dir: &std::path::Path,
    ) -> Result<Vec<(String, String)>, ConsoleError> {
        let files = aegis_teach::training_files(dir);
        let mut candidates: Vec<(String, String)> =
            aegis_teach::read_messages(&files.benign_check, &[])?
                .into_iter()
                .map(|m: LabelledMessage| (m.text, "benign check".to_string()))
                .collect();
        if let Some(latest) = self.store().eval_runs(1).await?.first() {
            if let Some(run) = self.store().eval_run(latest.id).await? {
                candidates.extend(
                    run.rows
                        .into_iter()
                        .take(EVAL_ROWS_FOR_FLIPS)
                        .map(|r| (r.text, format!("evaluation run {}", run.id))),
                );
            }
        }
        Ok(candidates)
    }

    /// Places the line of the head waiting to be applied at `threshold` (a point of its
    /// trade-off curve, as the author chose it): Apply writes that threshold with it.
    pub async fn place_line(&self, validator: &str, threshold: f64) -> Result<f64, ConsoleError> {
        if !(threshold > 0.0 && threshold < 1.0) {
            return Err(ConsoleError::Invalid(format!(
                "a threshold is between 0 and 1, not {threshold}"
            )));
        }
        let mut trained = lock(&self.trained);
        let head = trained.get_mut(validator).ok_or_else(|| {
            ConsoleError::Invalid(format!(
                "{validator} has no trained head whose line could move: Train first"
            ))
        })?;
        head.training.threshold = Some(threshold);
        Ok(threshold)
    }

    /// Makes the trained head live: written atomically where the guard reads it, recorded as a
    /// version with its threshold, and the guard reloaded so the next check uses it.
    pub async fn apply_head(&self, validator: &str) -> Result<AppliedHead, ConsoleError> {
        let head: Head = lock(&self.trained).get(validator).cloned().ok_or_else(|| {
            ConsoleError::Invalid(format!(
                "{validator} has no trained head to apply: Train first"
            ))
        })?;
        let guard = self.loaded_guard()?;
        let found = guard.validator(validator);
        let applied = aegis_teach::apply_head(
            self.store(),
            &self.actor(),
            &self.prompts_dir()?,
            found,
            &head,
            "Teach view",
        )
        .await?;
        lock(&self.trained).remove(validator);
        self.record_threshold_change(&applied).await?;
        self.reload_templates()?;
        Ok(applied_head(applied))
    }

    /// A head's threshold written into its template is a template version like any save.
    async fn record_threshold_change(
        &self,
        applied: &aegis_teach::Applied,
    ) -> Result<(), ConsoleError> {
        if applied.threshold.is_none() {
            return Ok(());
        }
        let validator = applied.validator.as_str();
        let dir = self.prompts_dir()?;
        let path = templates::template_path(&dir, validator)?;
        let content =
            std::fs::read_to_string(&path).map_err(|source| ConsoleError::Io { path, source })?;
        let parsed = templates::parse(&dir, validator, &content)?;
        self.store()
            .save_template_version(
                &self.actor(),
                validator,
                &parsed.content_hash,
                &parsed.content,
            )
            .await?;
        Ok(())
    }

    pub async fn head_versions(&self, validator: &str) -> Result<Vec<HeadVersion>, ConsoleError> {
        Ok(self.store().head_versions(validator).await?)
    }

    /// Puts an earlier head version back bit for bit (with its threshold) and reloads the guard.
    pub async fn revert_head(&self, version: i64) -> Result<AppliedHead, ConsoleError> {
        let guard = self.loaded_guard()?;
        let applied = aegis_teach::revert_head(
            self.store(),
            &self.actor(),
            &self.prompts_dir()?,
            guard.validators(),
            version,
        )
        .await?;
        self.record_threshold_change(&applied).await?;
        self.reload_templates()?;
        Ok(applied_head(applied))
    }
}

fn applied_head(applied: aegis_teach::Applied) -> AppliedHead {
    AppliedHead {
        version: applied.version,
        path: applied.path.display().to_string(),
        threshold: applied.threshold,
        kept_readings: applied.kept_readings,
    }
}

/// A template in the shipped validators' shape. Front-matter values are written as JSON strings,
/// which YAML reads as the same text whatever quotes or colons they hold.
fn new_template(new: &NewValidator, order: i64, format: ChatFormat) -> String {
    let quoted = |s: &str| serde_json::to_string(s.trim()).unwrap_or_else(|_| "\"\"".into());
    let policy = new.policy.trim();
    format!(
        "---\nname: {name}\ndescription: {description}\norder: {order}\nthreshold: 0.5\nrejection:\n  id: {id}\n  en: {en}\n---\n\
{user}\
You are a policy expert helping to decide whether a message sent to a chat assistant violates a safety policy. Messages may be written in Indonesian or English, often in informal chat style, slang or abbreviations.\n\n\
Our safety principle is defined below:\n\n\
* \"{title}\": {policy}\n\n\
Does the message below violate the above principle? Your answer must start with 'Yes' or 'No'.\n\n\
<message>\n{{{{message}}}}\n</message>{close}{model}",
        user = format.open(Speaker::User),
        close = format.close(),
        model = format.open(Speaker::Model),
        name = quoted(&new.name),
        description = quoted(policy.lines().next().unwrap_or(policy)),
        id = quoted(&new.rejection_id),
        en = quoted(&new.rejection_en),
        title = new.name.trim().replace('"', "'"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_template_parses_with_its_fields_whatever_they_hold() {
        let new = NewValidator {
            key: "pii".into(),
            name: "Personal data: \"requests\"".into(),
            policy: "Asking for OTP codes: never.\nSecond line".into(),
            rejection_id: "Maaf: tidak bisa.".into(),
            rejection_en: "Sorry # no".into(),
            positives: vec![],
            near_misses: vec![],
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let validator =
            templates::parse(dir.path(), "pii", &new_template(&new, 7, ChatFormat::Gemma))
                .expect("a valid template");
        assert_eq!(validator.name, "Personal data: \"requests\"");
        assert_eq!(validator.description, "Asking for OTP codes: never.");
        assert_eq!(validator.order, 7);
        assert!(validator.content.contains("{{message}}"));
        assert!(validator.content.contains("Second line"));
    }
}
