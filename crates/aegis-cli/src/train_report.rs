//! What `aegis train` reports for each validator it trains: every candidate's held-out figures,
//! the threshold the benign budget chose, what each source's rows score at the threshold, the
//! head on the author's own examples with the trade-off of its line, and reading progress as
//! lines where no terminal draws a bar.

use std::time::{Duration, Instant};

use aegis_eval::BudgetChoice;
use aegis_guard::ValidatorTraining;
use aegis_heads::{candidate_label, CvMetrics, Validation};

/// Per source (group), what the out-of-fold scores flag at `threshold`: recall on its positives,
/// the share of its negatives flagged. Under validation by source each group was scored by a
/// head that never saw it, so this says which kinds of traffic the head does not carry over to.
pub(crate) fn print_sources(t: &ValidatorTraining, threshold: f64) {
    // group -> (positives, caught, negatives, flagged)
    let mut groups: std::collections::BTreeMap<&str, (usize, usize, usize, usize)> =
        Default::default();
    for ((group, &label), &score) in t.groups.iter().zip(&t.labels).zip(&t.chosen.out_of_fold) {
        let entry = groups.entry(group.as_str()).or_default();
        let flagged = usize::from(score >= threshold);
        if label {
            entry.0 += 1;
            entry.1 += flagged;
        } else {
            entry.2 += 1;
            entry.3 += flagged;
        }
    }
    println!(
        "{}: per source at threshold {threshold:.3} ({} scores)",
        t.key,
        t.chosen.validation.describe()
    );
    println!(
        "  {:<58} {:>5} {:>7} {:>5} {:>8}",
        "source", "pos", "recall", "neg", "flagged"
    );
    let share = |part: usize, whole: usize| {
        if whole == 0 {
            "-".to_string()
        } else {
            format!("{:.3}", part as f64 / whole as f64)
        }
    };
    for (group, (positives, caught, negatives, flagged)) in groups {
        let name: String = group.chars().take(58).collect();
        println!(
            "  {name:<58} {positives:>5} {:>7} {negatives:>5} {:>8}",
            share(caught, positives),
            share(flagged, negatives)
        );
    }
}

/// `aegis train --scores-out FILE`: one JSON line per row each validator trained on, with its
/// text, language, source group, label and the chosen head's out-of-fold score.
#[cfg(feature = "lab")]
pub(crate) struct ScoresFile(Option<(std::path::PathBuf, std::io::BufWriter<std::fs::File>)>);

#[cfg(feature = "lab")]
impl ScoresFile {
    pub(crate) fn create(path: Option<&std::path::Path>) -> anyhow::Result<Self> {
        use anyhow::Context;
        let Some(path) = path else {
            return Ok(Self(None));
        };
        let file = std::fs::File::create(path)
            .with_context(|| format!("cannot write --scores-out {}", path.display()))?;
        Ok(Self(Some((
            path.to_path_buf(),
            std::io::BufWriter::new(file),
        ))))
    }

    /// `rows` is every usable row; those unlabelled for the validator were skipped by training,
    /// so are here.
    pub(crate) fn write(
        &mut self,
        t: &ValidatorTraining,
        rows: &[aegis_guard::LabelledMessage],
    ) -> anyhow::Result<()> {
        use anyhow::Context;
        use std::io::Write;
        let Some((path, out)) = &mut self.0 else {
            return Ok(());
        };
        let lines = score_lines(
            &t.key,
            t.chosen.validation.describe(),
            rows,
            &t.groups,
            &t.labels,
            &t.chosen.out_of_fold,
        )?;
        let written: std::io::Result<()> = lines
            .iter()
            .try_for_each(|line| writeln!(out, "{line}"))
            .and_then(|()| out.flush());
        written.with_context(|| format!("cannot write --scores-out {}", path.display()))
    }
}

/// One JSON line per row labelled for validator `key`, paired in order with training's groups,
/// labels and out-of-fold scores (training keeps the labelled rows in input order).
#[cfg(feature = "lab")]
fn score_lines(
    key: &str,
    validation: &str,
    rows: &[aegis_guard::LabelledMessage],
    groups: &[String],
    labels: &[bool],
    out_of_fold: &[f64],
) -> anyhow::Result<Vec<serde_json::Value>> {
    let labelled: Vec<_> = rows.iter().filter(|m| m.label(key).is_some()).collect();
    // zip would silently pair the wrong texts with scores if the counts ever parted, so a
    // mismatch is refused.
    anyhow::ensure!(
        labelled.len() == out_of_fold.len()
            && groups.len() == out_of_fold.len()
            && labels.len() == out_of_fold.len(),
        "--scores-out: {} rows labelled for {key} but {} groups, {} labels, {} out-of-fold scores",
        labelled.len(),
        groups.len(),
        labels.len(),
        out_of_fold.len()
    );
    Ok(labelled
        .iter()
        .zip(groups)
        .zip(labels)
        .zip(out_of_fold)
        .map(|(((message, group), label), score)| {
            serde_json::json!({
                "validator": key,
                "validation": validation,
                "text": message.text,
                "lang": message.language(),
                "group": group,
                "label": label,
                "score": score,
            })
        })
        .collect())
}

fn auc(m: Option<&CvMetrics>) -> String {
    m.and_then(|m| m.roc_auc)
        .map_or_else(|| "-".to_string(), |a| format!("{a:.3}"))
}

/// Per validator: every candidate's cross-validated ROC AUC, then the chosen head's metrics per
/// language: held-out sources first (what new traffic will see), random folds beside, and the
/// prompt's own AUC (when prompt scores were computed).
pub(crate) fn print_report(t: &ValidatorTraining) {
    let chosen = &t.chosen;
    let tried: Vec<String> = t
        .tried
        .iter()
        .map(|(layers, trained)| {
            let random = trained
                .random_folds
                .as_ref()
                .map(|r| format!(" (random {})", auc(Some(&r.cv))))
                .unwrap_or_default();
            format!(
                "{} {}{random}",
                candidate_label(layers),
                auc(Some(&trained.cv))
            )
        })
        .collect();
    // One candidate is not screened: the table below is its figure.
    if !tried.is_empty() {
        println!(
            "{}: layer candidates (ROC AUC, {}, at the screening strength): {}",
            t.key,
            chosen.validation.describe(),
            tried.join(", ")
        );
    }
    if let Some(why) = &chosen.fallback {
        println!("{}: cannot hold out sources ({why}); random folds", t.key);
    }
    let (first, second) = match chosen.validation {
        Validation::BySource => ("sources", "random"),
        Validation::RandomFolds => ("random", ""),
    };
    println!(
        "{:<18} {:<4} {:>5} {:>5}  {:>7}  {:>7}  {:>7}  {:>5} {:>5} {:>5}",
        "validator", "lang", "rows", "pos", first, second, "prompt", "P", "R", "F1"
    );
    let all = "all".to_string();
    for language in std::iter::once(&all).chain(chosen.cv_by_language.keys()) {
        let pick = |overall: &CvMetrics, by: &std::collections::BTreeMap<String, CvMetrics>| {
            if language == "all" {
                Some(overall.clone())
            } else {
                by.get(language).cloned()
            }
        };
        let prompt = t
            .prompt
            .as_ref()
            .and_then(|p| pick(&p.overall, &p.by_language));
        let random = chosen
            .random_folds
            .as_ref()
            .and_then(|r| pick(&r.cv, &r.cv_by_language));
        let Some(head) = pick(&chosen.cv, &chosen.cv_by_language) else {
            continue;
        };
        println!(
            "{:<18} {:<4} {:>5} {:>5}  {:>7}  {:>7}  {:>7}  {:>5.2} {:>5.2} {:>5.2}",
            t.key,
            language,
            head.rows,
            head.positives,
            auc(Some(&head)),
            if random.is_some() {
                auc(random.as_ref())
            } else {
                String::new()
            },
            auc(prompt.as_ref()),
            head.precision,
            head.recall,
            head.f1
        );
    }
    println!(
        "{:<18} layers {}, alpha {} (head ROC AUC out of fold, {} folds: {}; P/R/F1 at 0.5)",
        t.key,
        t.head.features.label(),
        t.head.training.alpha,
        chosen.folds,
        chosen.validation.describe()
    );
    if t.head.training.by_language {
        let mapped: Vec<&str> = chosen
            .languages
            .iter()
            .map(|m| m.language.as_str())
            .collect();
        let rule = match t.head.language_rule {
            aegis_heads::LanguageRule::Detected => {
                "each language's rows scored on their map out of fold); other languages read \
                 the shared map"
            }
            aegis_heads::LanguageRule::Highest => {
                "every row scored by the highest of the maps out of fold, whatever its \
                 language)"
            }
        };
        println!(
            "{:<18} a map per language for {} (the shared map plus its correction, {rule}",
            t.key,
            if mapped.is_empty() {
                "none".to_string()
            } else {
                mapped.join(", ")
            },
        );
    }
}

/// The head on the author's own examples, out of fold: the figure to trust for a taught policy.
pub(crate) fn print_author_figures(
    key: &str,
    usable: &[aegis_guard::LabelledMessage],
    trained: &ValidatorTraining,
    threshold: f64,
    trade_off: &[aegis_teach::LinePoint],
) {
    let figures = aegis_teach::author_figures(key, usable, &trained.chosen.out_of_fold, threshold);
    if let Some(why) = &figures.too_few {
        eprintln!("{key}: on your examples: {why}");
        return;
    }
    let percent = |share: Option<f64>| share.map_or("-".into(), |s| format!("{:.0}%", s * 100.0));
    eprintln!(
        "{key}: on your examples ({} violating, {} passing, out of fold): ROC AUC {}, caught {}, passing ones flagged {}",
        figures.violating,
        figures.passing,
        figures.roc_auc.map_or("-".into(), |a| format!("{a:.3}")),
        percent(figures.recall),
        percent(figures.passing_flagged),
    );
    print_trade_off(key, trade_off, threshold);
}

/// Where else the line could go: a dozen places along the curve, evenly by rank, with the
/// chosen line marked.
fn print_trade_off(key: &str, curve: &[aegis_teach::LinePoint], threshold: f64) {
    const SHOWN: usize = 12;
    if curve.is_empty() {
        return;
    }
    let percent = |share: Option<f64>| share.map_or("-".into(), |s| format!("{:.0}%", s * 100.0));
    eprintln!("{key}: the line elsewhere, on your examples out of fold (--threshold places it):");
    eprintln!("  threshold  caught  near misses flagged  benign flagged");
    let step = curve.len().div_ceil(SHOWN).max(1);
    for (i, point) in curve.iter().enumerate() {
        let chosen = point.threshold == threshold;
        if i % step != 0 && !chosen {
            continue;
        }
        eprintln!(
            "  {:>9.3}  {:>6}  {:>19}  {:>14}{}",
            point.threshold,
            percent(Some(point.recall)),
            percent(point.near_misses_flagged),
            percent(point.benign_flagged),
            if chosen { "  <- chosen" } else { "" }
        );
    }
}

/// Without a terminal (a log, CI) the bar is hidden, so progress is printed as lines this often.
const PROGRESS_LINE_EVERY: Duration = Duration::from_secs(30);

/// The line on the threshold the benign budget chose on the head's out-of-fold probabilities
/// (nested in the same folds: by source, each fold's benign rows are cut at the threshold the
/// other sources chose).
pub(crate) fn print_budget_choice(
    guard: &aegis_guard::Guard,
    key: &str,
    choice: Option<&BudgetChoice>,
    budget: f64,
) {
    let Some(validator) = guard.validator(key) else {
        return;
    };
    let Some(choice) = choice else {
        eprintln!("{key}: threshold not tuned (no benign rows in its data)");
        return;
    };
    let text = aegis_eval::metric_text;
    println!(
        "{key:<18} threshold {:.3} -> {:.3}: benign false positives {} of {} rows (budget {}), recall {}, precision {}, F1 {} (nested CV)",
        validator.threshold,
        choice.threshold,
        text(choice.benign_false_positive_rate),
        choice.benign_rows,
        text(Some(budget)),
        text(choice.recall),
        text(choice.precision),
        text(choice.f1),
    );
}

/// Progress as plain lines, for a log that has no terminal to draw a bar on.
pub(crate) struct ProgressLines {
    total: usize,
    done: usize,
    started: Instant,
    last: Instant,
}

impl ProgressLines {
    pub(crate) fn new(total: usize) -> Self {
        eprintln!("reading {total} messages");
        let now = Instant::now();
        Self {
            total,
            done: 0,
            started: now,
            last: now,
        }
    }

    pub(crate) fn reached(&mut self, done: usize) {
        self.done = done;
        if self.last.elapsed() < PROGRESS_LINE_EVERY && self.done < self.total {
            return;
        }
        self.last = Instant::now();
        let seconds = self.started.elapsed().as_secs_f64().max(1e-3);
        let rate = self.done as f64 / seconds;
        let left = (self.total - self.done) as f64 / rate.max(1e-9);
        eprintln!(
            "reading messages: {}/{} ({:.0}%), {rate:.1} a second, about {:.0} s left",
            self.done,
            self.total,
            100.0 * self.done as f64 / self.total.max(1) as f64,
            left
        );
    }
}

#[cfg(feature = "lab")]
#[cfg(test)]
mod tests {
    use super::score_lines;
    use aegis_guard::LabelledMessage;

    fn row(text: &str, toxic: Option<bool>) -> LabelledMessage {
        LabelledMessage {
            id: None,
            text: text.to_string(),
            lang: Some("en".to_string()),
            labels: [("toxic".to_string(), toxic)].into_iter().collect(),
            source: None,
            kind: None,
        }
    }

    #[test]
    fn scores_pair_with_the_rows_labelled_for_the_validator_skipping_the_rest() {
        let rows = [
            row("first", Some(true)),
            row("unlabelled", None),
            row("third", Some(false)),
        ];
        let groups = ["a".to_string(), "b".to_string()];
        let lines = score_lines(
            "toxic",
            "folds",
            &rows,
            &groups,
            &[true, false],
            &[0.9, 0.1],
        )
        .expect("counts agree");
        let pairs: Vec<(&str, &str, f64)> = lines
            .iter()
            .map(|l| {
                (
                    l["text"].as_str().unwrap(),
                    l["group"].as_str().unwrap(),
                    l["score"].as_f64().unwrap(),
                )
            })
            .collect();
        assert_eq!(pairs, [("first", "a", 0.9), ("third", "b", 0.1)]);
        assert_eq!(lines[1]["label"], false);
    }

    #[test]
    fn a_count_mismatch_is_refused_rather_than_misaligned() {
        let rows = [row("first", Some(true)), row("second", Some(false))];
        let groups = ["a".to_string()];
        let refused = score_lines("toxic", "folds", &rows, &groups, &[true], &[0.9]);
        let message = refused
            .expect_err("two labelled rows, one score")
            .to_string();
        assert!(message.contains("2 rows labelled for toxic"), "{message}");
    }
}
