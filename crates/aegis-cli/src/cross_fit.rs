//! `aegis adapt --cross-fit K`: an honest measure of an adaptation before it ships (issue "Read
//! who says it"). The training rows are dealt into K folds of whole sources, shared by every
//! validator; the adapter trained without fold k reads fold k, and a head trained on the other
//! folds' rows (read by the same adapter) scores it. The same is done on the plain encoder, so
//! the two lines differ only in the adaptation. Thresholds are chosen on those out-of-fold scores
//! at the benign budget, and `--score` files (never trained on) are read by every fold's adapter
//! and head, their mean score against that threshold. A third reading stacks on scores: each
//! fold's rows scored by the steering heads trained beside that fold's adapter.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use aegis_adapt::{cross_fit, AdapterShape, Progress, TrainingOptions, TrainingText};
use aegis_guard::LabelledMessage;
use aegis_heads::{roc_auc, source_folds, Example, TrainOptions};
use anyhow::{Context, Result};

/// Scores of one way of reading the texts (plain or adapted) for one validator.
struct ValidatorScores {
    /// Folds whose training side lacked a class for this validator (their rows unscored).
    skipped: Vec<usize>,
    /// Out-of-fold probability of each training row labelled for the validator.
    out_of_fold: Vec<Option<f64>>,
    /// Mean over the folds' heads, for every scored row.
    scored: Vec<Option<f64>>,
}

/// The rows only scored, and the file each came from.
pub struct ScoredFiles {
    names: Vec<String>,
    rows: Vec<LabelledMessage>,
    file_of: Vec<usize>,
}

impl ScoredFiles {
    pub fn read(paths: &[PathBuf]) -> Result<Self> {
        let mut scored = Self {
            names: Vec::new(),
            rows: Vec::new(),
            file_of: Vec::new(),
        };
        for (file, path) in paths.iter().enumerate() {
            let rows = aegis_teach::read_messages(std::slice::from_ref(path), &[])?;
            scored.file_of.extend(std::iter::repeat_n(file, rows.len()));
            scored.rows.extend(rows);
            scored.names.push(path.display().to_string());
        }
        Ok(scored)
    }
}

pub struct CrossFitRun<'a> {
    pub folder: &'a Path,
    pub validators: &'a [String],
    pub shape: AdapterShape,
    pub options: TrainingOptions,
    pub folds: usize,
    pub benign_budget: f64,
    /// Where to write each training row's out-of-fold embedding, and the run's settings to record
    /// with them.
    pub out_of_fold: Option<(&'a Path, String)>,
}

pub fn run(
    run: &CrossFitRun,
    trained_on: &[LabelledMessage],
    scored_files: &ScoredFiles,
    say: &mut dyn FnMut(String),
) -> Result<()> {
    let scored = &scored_files.rows;
    let training_texts: std::collections::HashSet<&str> =
        trained_on.iter().map(|m| m.text.as_str()).collect();
    let also_trained = scored
        .iter()
        .filter(|m| training_texts.contains(m.text.as_str()))
        .count();
    if also_trained > 0 {
        say(format!(
            "warning: {also_trained} scored rows are also training rows: their figures are not held out"
        ));
    }
    let mut texts: Vec<TrainingText> = trained_on
        .iter()
        .map(|m| training_text(m, run.validators))
        .collect();
    // One split for every validator: an adapter is shared by all four.
    let any_positive: Vec<bool> = texts
        .iter()
        .map(|t| t.labels.contains(&Some(true)))
        .collect();
    let groups: Vec<String> = texts.iter().map(|t| t.group.clone()).collect();
    // Scored rows teach nothing: no label reaches an adapter.
    texts.extend(scored.iter().map(|m| TrainingText {
        labels: vec![None; run.validators.len()],
        ..training_text(m, run.validators)
    }));
    let group_refs: Vec<&str> = groups.iter().map(String::as_str).collect();
    let (fold_of, folds) = source_folds(&any_positive, &group_refs, run.folds)
        .map_err(|why| anyhow::anyhow!("the rows cannot be split by source: {why}"))?;
    let mut text_folds: Vec<Option<usize>> = fold_of.iter().copied().map(Some).collect();
    text_folds.resize(texts.len(), None);
    say(format!(
        "cross-fitting {folds} adapters on {} training rows from {} sources; {} rows scored only",
        trained_on.len(),
        groups
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        scored.len()
    ));
    let mut phase_started = std::time::Instant::now();
    let mut last_said = std::time::Instant::now();
    let fitted = cross_fit(
        run.folder,
        &texts,
        &text_folds,
        folds,
        run.validators.len(),
        run.shape.clone(),
        &run.options,
        |p| match p {
            Progress::Fold { fold, folds } => {
                phase_started = std::time::Instant::now();
                say(format!(
                    "fold {}/{folds}: training an adapter without it",
                    fold + 1
                ));
            }
            Progress::States { done, total } if done == total => {
                say(format!("lower-layer states read for {total} texts"))
            }
            Progress::Step(step) if step.step == step.steps => say(format!(
                "trained: {} steps, last loss {:.4}, {:.0} s",
                step.steps,
                step.loss,
                step.elapsed.as_secs_f64()
            )),
            Progress::Step(step) if last_said.elapsed().as_secs() >= 30 => {
                last_said = std::time::Instant::now();
                say(format!(
                    "epoch {} step {}/{}: loss {:.4}, {:.0} s",
                    step.epoch,
                    step.step,
                    step.steps,
                    step.loss,
                    step.elapsed.as_secs_f64()
                ));
            }
            Progress::Embedded { done, total } if done == total => say(format!(
                "{total} texts read through it, {:.0} s since it started",
                phase_started.elapsed().as_secs_f64()
            )),
            _ => {}
        },
    )?;
    for (fold, report) in fitted.reports.iter().enumerate() {
        say(format!(
            "fold {}: {} rows trained on, kept step {} of {}, validation losses {:?}",
            fold + 1,
            report.texts,
            report.kept_step,
            report.steps,
            report
                .validation_losses
                .iter()
                .map(|(s, l)| format!("{s}: {l:.4}"))
                .collect::<Vec<_>>()
        ));
    }
    if let Some((path, settings)) = &run.out_of_fold {
        let written = write_out_of_fold(path, settings, trained_on, &fold_of, &fitted.by_fold)?;
        say(format!(
            "wrote {written} training rows' out-of-fold embeddings to {}: train the heads on them \
             beside the adapter trained with the same settings (aegis train --out-of-fold)",
            path.display()
        ));
    }
    let unread = fitted.plain.iter().filter(|e| e.is_none()).count();
    say(format!(
        "{unread} texts over {} tokens are left out of every figure",
        aegis_adapt::MAX_TRAINING_TOKENS
    ));
    for (name, adapted) in [
        ("plain encoder", false),
        ("adapted, heads trained on the other folds", true),
    ] {
        let embedding = |fold: usize, row: usize| -> Option<&Vec<f32>> {
            let by = if adapted {
                &fitted.by_fold[fold]
            } else {
                &fitted.plain
            };
            by[row].as_ref()
        };
        let scores = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..run.validators.len())
                .map(|v| {
                    let embedding = &embedding;
                    let fold_of = &fold_of;
                    scope.spawn(move || {
                        score_validator(v, run, trained_on, scored.len(), fold_of, folds, embedding)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a scoring thread panicked"))
                .collect::<Result<Vec<_>>>()
        })?;
        say(format!("\n== {name} =="));
        report(run, trained_on, scored_files, &fold_of, &scores, say);
    }
    let stacked = (0..run.validators.len())
        .map(|v| steering_scores(v, run, trained_on, scored.len(), &fold_of, &fitted))
        .collect::<Result<Vec<_>>>()?;
    say("\n== adapted, each fold's own steering heads (stacking on scores) ==".to_string());
    report(run, trained_on, scored_files, &fold_of, &stacked, say);
    Ok(())
}

/// Out-of-fold scores of validator `v`'s training rows, and the scored rows' mean over folds.
fn score_validator<'e>(
    v: usize,
    run: &CrossFitRun,
    trained_on: &[LabelledMessage],
    scored_rows: usize,
    fold_of: &[usize],
    folds: usize,
    embedding: &(dyn Fn(usize, usize) -> Option<&'e Vec<f32>> + Sync),
) -> Result<ValidatorScores> {
    let key = &run.validators[v];
    let mut out_of_fold = vec![None; trained_on.len()];
    let mut sums = vec![(0.0, 0usize); scored_rows];
    let mut skipped = Vec::new();
    for fold in 0..folds {
        let examples: Vec<Example> = trained_on
            .iter()
            .enumerate()
            .filter(|(i, _)| fold_of[*i] != fold)
            .filter_map(|(i, m)| {
                Some(Example {
                    features: embedding(fold, i)?.clone(),
                    label: m.label(key)?,
                    language: m.language(),
                    detected_language: aegis_guard::Language::detect(&m.text).code().into(),
                    group: m.source_group(),
                    taught: false,
                })
            })
            .collect();
        let head = match aegis_heads::train(&examples, &TrainOptions::default()) {
            Ok(head) => head,
            // A fold that holds every positive of a validator leaves nothing to learn from: its
            // rows go unscored for that validator, and the report says so.
            Err(aegis_heads::HeadError::TooFewExamples { .. }) => {
                skipped.push(fold);
                continue;
            }
            Err(e) => {
                return Err(e).with_context(|| format!("{key}: the head without fold {}", fold + 1))
            }
        };
        // Trained with the default options, the head has one map for every language.
        let probability = |x: &[f32]| head.probability(x, "");
        for (i, m) in trained_on.iter().enumerate() {
            if fold_of[i] == fold && m.label(key).is_some() {
                out_of_fold[i] = embedding(fold, i).map(|x| probability(x)).transpose()?;
            }
        }
        for (s, sum) in sums.iter_mut().enumerate() {
            if let Some(x) = embedding(fold, trained_on.len() + s) {
                sum.0 += probability(x)?;
                sum.1 += 1;
            }
        }
    }
    Ok(ValidatorScores {
        skipped,
        out_of_fold,
        scored: sums
            .into_iter()
            .map(|(sum, n)| (n > 0).then(|| sum / n as f64))
            .collect(),
    })
}

/// Validator `v`'s scores from the steering heads each fold's adapter was trained with: a training
/// row by its own fold's adapter and heads, a scored row the mean over folds. A probability is
/// comparable across folds where an embedding is not, so thresholds chosen on these are honest
/// for an adapter shipped with its own steering heads.
fn steering_scores(
    v: usize,
    run: &CrossFitRun,
    trained_on: &[LabelledMessage],
    scored_rows: usize,
    fold_of: &[usize],
    fitted: &aegis_adapt::CrossFit,
) -> Result<ValidatorScores> {
    let probability = |fold: usize, row: usize| -> Result<Option<f64>> {
        fitted.by_fold[fold][row]
            .as_ref()
            .map(|x| fitted.reports[fold].steering.probability(v, x))
            .transpose()
            .map_err(Into::into)
    };
    let mut out_of_fold = vec![None; trained_on.len()];
    for (row, message) in trained_on.iter().enumerate() {
        if message.label(&run.validators[v]).is_some() {
            out_of_fold[row] = probability(fold_of[row], row)?;
        }
    }
    let mut scored = Vec::with_capacity(scored_rows);
    for s in 0..scored_rows {
        let mut sum = (0.0, 0usize);
        for fold in 0..fitted.by_fold.len() {
            if let Some(p) = probability(fold, trained_on.len() + s)? {
                sum.0 += p;
                sum.1 += 1;
            }
        }
        scored.push((sum.1 > 0).then(|| sum.0 / sum.1 as f64));
    }
    Ok(ValidatorScores {
        skipped: Vec::new(),
        out_of_fold,
        scored,
    })
}

/// Prints, per validator, the held-out-source ROC AUC by language and the budget's threshold,
/// then the scored rows by file kind and language.
fn report(
    run: &CrossFitRun,
    trained_on: &[LabelledMessage],
    scored_files: &ScoredFiles,
    fold_of: &[usize],
    scores: &[ValidatorScores],
    say: &mut dyn FnMut(String),
) {
    let scored = &scored_files.rows;
    let mut thresholds = Vec::new();
    for (v, key) in run.validators.iter().enumerate() {
        let rows: Vec<usize> = (0..trained_on.len())
            .filter(|&i| scores[v].out_of_fold[i].is_some())
            .collect();
        let values: Vec<f64> = rows
            .iter()
            .filter_map(|&i| scores[v].out_of_fold[i])
            .collect();
        let labels: Vec<bool> = rows
            .iter()
            .map(|&i| trained_on[i].label(key) == Some(true))
            .collect();
        let benign: Vec<bool> = rows.iter().map(|&i| trained_on[i].is_benign()).collect();
        let folds: Vec<usize> = rows.iter().map(|&i| fold_of[i]).collect();
        let choice = aegis_eval::choose_threshold_for_budget(
            &values,
            &labels,
            &benign,
            run.benign_budget,
            &folds,
            3,
        );
        let mut by_language = BTreeMap::<String, (Vec<f64>, Vec<bool>)>::new();
        for (k, &i) in rows.iter().enumerate() {
            let entry = by_language.entry(trained_on[i].language()).or_default();
            entry.0.push(values[k]);
            entry.1.push(labels[k]);
        }
        let aucs: Vec<String> = by_language
            .iter()
            .map(|(language, (s, l))| format!("{language} {}", shown(roc_auc(s, l))))
            .collect();
        let threshold = choice.as_ref().map(|c| c.threshold);
        say(format!(
            "{key:<17} held-out-source ROC AUC {}; threshold {} at {:.1}% of benign rows, recall {} (nested), benign flagged {} (nested)",
            aucs.join(", "),
            shown(threshold),
            run.benign_budget * 100.0,
            shown(choice.as_ref().and_then(|c| c.recall)),
            shown(choice.as_ref().and_then(|c| c.benign_false_positive_rate)),
        ));
        if !scores[v].skipped.is_empty() {
            say(format!(
                "{key:<17} folds {:?} unscored: their training side holds too few of a class",
                scores[v].skipped.iter().map(|f| f + 1).collect::<Vec<_>>()
            ));
        }
        thresholds.push(threshold.unwrap_or(0.5));
    }
    let fails = |s: usize, v: usize| scores[v].scored[s].is_some_and(|p| p >= thresholds[v]);
    let fails_any = |s: usize| (0..run.validators.len()).any(|v| fails(s, v));
    // Each scored file's benign rows, the budget's figure on text no fold trained on.
    for (file, name) in scored_files.names.iter().enumerate() {
        let benign: Vec<usize> = (0..scored.len())
            .filter(|&s| scored_files.file_of[s] == file && scored[s].is_benign())
            .collect();
        if !benign.is_empty() {
            let flagged = benign.iter().filter(|&&s| fails_any(s)).count();
            say(format!(
                "{name}: benign rows flagged by any validator {flagged}/{} ({:.1}%)",
                benign.len(),
                100.0 * flagged as f64 / benign.len() as f64
            ));
        }
    }
    // Scored rows, by kind (or source) and language.
    let mut kinds = BTreeMap::<(String, String), Vec<usize>>::new();
    for (s, m) in scored.iter().enumerate() {
        let kind = m
            .kind
            .clone()
            .or_else(|| m.source.clone())
            .unwrap_or_else(|| "-".into());
        kinds.entry((kind, m.language())).or_default().push(s);
    }
    for ((kind, language), rows) in &kinds {
        let positives: Vec<usize> = (0..run.validators.len())
            .filter(|&v| {
                rows.iter()
                    .any(|&s| scored[s].label(&run.validators[v]) == Some(true))
            })
            .collect();
        let n = rows.len();
        let line = if positives.is_empty() {
            let any = rows.iter().filter(|&&s| fails_any(s)).count();
            let per: Vec<String> = run
                .validators
                .iter()
                .enumerate()
                .map(|(v, key)| format!("{key} {}", rows.iter().filter(|&&s| fails(s, v)).count()))
                .collect();
            format!(
                "flagged by any {any}/{n} ({:.1}%); {}",
                100.0 * any as f64 / n as f64,
                per.join(", ")
            )
        } else {
            positives
                .iter()
                .map(|&v| {
                    let key = &run.validators[v];
                    let labelled: Vec<usize> = rows
                        .iter()
                        .copied()
                        .filter(|&s| scored[s].label(key) == Some(true))
                        .collect();
                    let caught = labelled.iter().filter(|&&s| fails(s, v)).count();
                    let scored_values: Vec<(f64, bool)> = rows
                        .iter()
                        .filter_map(|&s| Some((scores[v].scored[s]?, scored[s].label(key)?)))
                        .collect();
                    let (values, labels): (Vec<f64>, Vec<bool>) = scored_values.into_iter().unzip();
                    format!(
                        "{key} caught {caught}/{} (ROC AUC {})",
                        labelled.len(),
                        shown(roc_auc(&values, &labels))
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        say(format!("  {kind:<28} {language:<3} {n:>5} rows: {line}"));
    }
}

fn shown(value: Option<f64>) -> String {
    value.map_or_else(|| "-".into(), |v| format!("{v:.3}"))
}

/// Row i's embedding through the adapter trained without its fold; rows too long to read are
/// left out (the shipped adapter never trains on them, so its own reading of them is held out).
fn write_out_of_fold(
    path: &Path,
    settings: &str,
    trained_on: &[LabelledMessage],
    fold_of: &[usize],
    by_fold: &[aegis_adapt::Embeddings],
) -> Result<usize> {
    let mut out_of_fold = aegis_adapt::OutOfFold::new(settings.to_string());
    for (row, message) in trained_on.iter().enumerate() {
        if let Some(embedding) = &by_fold[fold_of[row]][row] {
            out_of_fold.insert(&message.text, embedding.clone())?;
        }
    }
    out_of_fold
        .write(path)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(out_of_fold.len())
}

/// A labelled row as training reads it: its labels for `validators`, in order, and its source
/// group.
pub(crate) fn training_text(message: &LabelledMessage, validators: &[String]) -> TrainingText {
    TrainingText {
        text: message.text.clone(),
        labels: validators.iter().map(|v| message.label(v)).collect(),
        group: message.source_group(),
    }
}
