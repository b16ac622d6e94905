//! The template editor's side: template files with their problems and scores, saves, reloads,
//! watching the folder for other editors, and trying an edit on recent messages.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use aegis_guard::{Guard, GuardError, ScoreSource, Verdict};
use aegis_runtime::{LoadedGuard, WorkerError};
use aegis_store::{MemberRole, TemplateSave};
use serde::Serialize;

use crate::error::ConsoleError;
use crate::templates::{self, TemplateFile, TemplateProblem};

use super::{check_size, Console, ConsoleEvent};

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct TryRow {
    pub text: String,
    pub saved: Verdict,
    pub edited: Verdict,
    /// The edited template's validator passed one way and fails the other (or back).
    pub flipped: bool,
}

impl Console {
    /// Every template file, valid or not, and how the running guard scores it.
    pub fn templates(&self) -> Result<Vec<TemplateFile>, ConsoleError> {
        let dir = self.prompts_dir()?;
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
                        Some(ScoreSource::deciding(g.heads()[slot].is_some()).as_str())
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
    /// next check uses it. A refused template is not written; the error names its line. In a
    /// team only authors save, and a reviewer's save leaves the file as it was.
    pub async fn save_template(
        &self,
        key: &str,
        content: &str,
    ) -> Result<TemplateSave, ConsoleError> {
        let actor = self.actor();
        self.store
            .require_role(&actor, MemberRole::Author, "save templates")
            .await?;
        let validator = templates::save(&self.prompts_dir()?, key, content)?;
        let saved = self
            .store
            .save_template_version(&actor, key, &validator.content_hash, &validator.content)
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
        // The same model, encoder and rejection mode; the settings' language.
        let (guard, found) = current.reload(&self.prompts_dir()?)?;
        *self.problems.write().unwrap_or_else(|p| p.into_inner()) = describe(&found);
        worker.replace_guard(guard.with_language(self.rejection_language()));
        self.events.emit(ConsoleEvent::TemplatesChanged);
        Ok(())
    }

    /// Reloads the guard whenever a template file in the folder changes (another editor, git),
    /// and tells the window. Runs until the app ends.
    pub async fn watch_templates(self: Arc<Self>) {
        use notify::Watcher;
        let dir = match self.prompts_dir() {
            Ok(dir) => dir,
            Err(e) => {
                tracing::warn!(error = %e, "no templates folder to watch");
                return;
            }
        };
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
        let edited = templates::parse(&self.prompts_dir()?, key, content)?;
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
}

pub(super) fn describe(problems: &[GuardError]) -> Vec<(String, TemplateProblem)> {
    problems
        .iter()
        .map(|p| {
            let (path, message, line) = match p {
                GuardError::Template {
                    path,
                    problem,
                    line,
                } => (path.clone(), problem.clone(), *line),
                GuardError::HeadRefused { path, .. } | GuardError::ReadingOff { path, .. } => {
                    (path.clone(), p.to_string(), None)
                }
                other => (PathBuf::new(), other.to_string(), None),
            };
            let key = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            (key, TemplateProblem { message, line })
        })
        .collect()
}
