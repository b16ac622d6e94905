//! Where a validator's training rows come from (the labelled files beside the heads, examples
//! taught in history) and the two ways rows are shaped for one validator: a new validator's
//! negatives, and a learning curve's subset of positives.

use std::path::{Path, PathBuf};

use aegis_guard::{LabelledMessage, TAUGHT_ID_PREFIX};
use aegis_store::{ExampleOrigin, StoredExample};

use crate::error::Result;

/// The labelled files in a templates folder's `heads/`: those ending in `-holdout.jsonl` are never
/// trained on (they are the benign check a new head's flips are shown on); the rest are the
/// shipped training data `scripts/train-heads.sh` names.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TrainingFiles {
    pub training: Vec<PathBuf>,
    pub benign_check: Vec<PathBuf>,
}

pub fn training_files(templates_dir: &Path) -> TrainingFiles {
    let mut files = TrainingFiles::default();
    let Ok(entries) = std::fs::read_dir(templates_dir.join(aegis_guard::HEADS_DIR)) else {
        return files;
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    paths.sort();
    for path in paths {
        let holdout = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().ends_with("-holdout.jsonl"));
        if holdout {
            files.benign_check.push(path);
        } else {
            files.training.push(path);
        }
    }
    files
}

/// Labelled rows of JSONL or CSV files, read as `aegis eval` reads them (a malformed row is an
/// error naming it), less the rows whose `source` is excluded.
pub fn read_messages(
    files: &[PathBuf],
    exclude_sources: &[String],
) -> Result<Vec<LabelledMessage>> {
    let mut messages = Vec::new();
    for file in files {
        let dataset = aegis_eval::Dataset::load(file)?;
        messages.extend(dataset.rows.into_iter().map(|row| row.message).filter(|m| {
            m.source
                .as_ref()
                .is_none_or(|s| !exclude_sources.contains(s))
        }));
    }
    Ok(messages)
}

/// The source of a taught row, with its language (`taught-en`): its group in validation by
/// source. One author wrote them all, so each language is one style, whatever way an example
/// arrived: a head taught in two languages is measured on each with only the other to learn
/// from, and a label on a suggested message is held out with the examples it was suggested
/// beside (grouped by origin too, the suggestions' fold never saw a near miss, and out-of-fold
/// scores said little).
const TAUGHT_SOURCE_PREFIX: &str = "taught-";

/// Whether a taught row is a label on a message the labelling queue suggested (its origin is
/// `suggestion`): chosen where the head was unsure or wrong, it says less about where the author
/// means the line to be than the examples the author chose.
pub(crate) fn was_suggested(message: &LabelledMessage) -> bool {
    message.is_taught() && message.kind.as_deref() == Some(ExampleOrigin::Suggestion.as_str())
}

/// Taught examples as labelled rows: each labels its own validator only, is grouped by its
/// language in validation by source, and keeps its origin as its kind.
pub fn taught_rows(examples: Vec<StoredExample>) -> Vec<LabelledMessage> {
    examples
        .into_iter()
        // A client's proposal is not trained on until a reviewer accepts it.
        .filter(|e| !e.pending)
        .map(|e| LabelledMessage {
            id: Some(format!("{TAUGHT_ID_PREFIX}{}", e.id)),
            text: e.text,
            source: Some(format!("{TAUGHT_SOURCE_PREFIX}{}", e.language)),
            lang: Some(e.language),
            labels: [(e.validator, Some(e.violates))].into(),
            kind: Some(e.origin.as_str().to_string()),
        })
        .collect()
}

/// A validator no data file labels (one a prompt author created from examples) learns what it is
/// not from the data: every data row without its label becomes a negative (benign messages and
/// the other validators' positives). Returns how many; 0 when some data row labels it.
pub fn negatives_for_new_validator(
    data: &mut [LabelledMessage],
    taught: &[LabelledMessage],
    key: &str,
) -> usize {
    let labelled_in_data = data.iter().any(|m| m.label(key).is_some());
    let taught_positives = taught.iter().any(|m| m.label(key) == Some(true));
    if labelled_in_data || !taught_positives {
        return 0;
    }
    for message in data.iter_mut() {
        message.labels.insert(key.to_string(), Some(false));
    }
    data.len()
}

/// Keeps `wanted` of the validator's positives, evenly spaced in row order (so they come from
/// every source in proportion), and unlabels the rest for this validator. Returns how many are
/// kept.
pub fn keep_positives(messages: &mut [LabelledMessage], key: &str, wanted: usize) -> usize {
    let positives: Vec<usize> = (0..messages.len())
        .filter(|&i| messages[i].label(key) == Some(true))
        .collect();
    if wanted >= positives.len() {
        return positives.len();
    }
    let keep: std::collections::BTreeSet<usize> = (0..wanted)
        .map(|k| positives[k * positives.len() / wanted])
        .collect();
    for &i in &positives {
        if !keep.contains(&i) {
            messages[i].labels.insert(key.to_string(), None);
        }
    }
    keep.len()
}
#[cfg(test)]
mod tests {
    use super::*;

    fn row(labels: &[(&str, Option<bool>)]) -> LabelledMessage {
        LabelledMessage {
            id: None,
            text: "x".into(),
            lang: Some("en".into()),
            labels: labels.iter().map(|(k, l)| (k.to_string(), *l)).collect(),
            source: Some("s".into()),
            kind: None,
        }
    }

    /// `aegis train`, Teach and `aegis examples import` read labelled files with `aegis eval`'s
    /// reader: a CSV gives the rows its JSONL twin gives.
    #[test]
    fn a_labelled_csv_reads_as_the_same_rows_as_its_jsonl_twin() -> Result<()> {
        let dir = tempfile::tempdir().expect("tempdir");
        let csv = dir.path().join("set.csv");
        std::fs::write(
            &csv,
            "id,text,lang,source,spam,toxic\na,\"WIN NOW, click\",en,s1,true,\nb,see you at 5,en,s2,false,false\n",
        )
        .expect("write");
        let jsonl = dir.path().join("set.jsonl");
        std::fs::write(
            &jsonl,
            concat!(
                "{\"id\":\"a\",\"text\":\"WIN NOW, click\",\"lang\":\"en\",\"source\":\"s1\",\"labels\":{\"spam\":true,\"toxic\":null}}\n",
                "{\"id\":\"b\",\"text\":\"see you at 5\",\"lang\":\"en\",\"source\":\"s2\",\"labels\":{\"spam\":false,\"toxic\":false}}\n",
            ),
        )
        .expect("write");
        let from_csv = read_messages(std::slice::from_ref(&csv), &[])?;
        assert_eq!(from_csv.len(), 2);
        assert_eq!(from_csv, read_messages(&[jsonl], &[])?);
        let kept = read_messages(&[csv], &["s1".to_string()])?;
        assert_eq!(kept.len(), 1, "the excluded source's row is left out");
        Ok(())
    }

    #[test]
    fn a_new_validator_takes_the_data_as_negatives_and_a_known_one_does_not() {
        let mut data = vec![row(&[("spam", Some(true))]), row(&[("spam", Some(false))])];
        let taught = vec![row(&[("pii", Some(true))])];
        assert_eq!(negatives_for_new_validator(&mut data, &taught, "pii"), 2);
        assert!(data.iter().all(|m| m.label("pii") == Some(false)));
        assert_eq!(negatives_for_new_validator(&mut data, &taught, "spam"), 0);
        let mut fresh = vec![row(&[("spam", Some(true))])];
        assert_eq!(
            negatives_for_new_validator(&mut fresh, &[], "pii"),
            0,
            "nothing taught"
        );
    }

    #[test]
    fn kept_positives_are_spread_over_the_rows() {
        let mut rows: Vec<LabelledMessage> = (0..10)
            .map(|i| row(&[("toxic", Some(i % 2 == 0))]))
            .collect();
        assert_eq!(keep_positives(&mut rows, "toxic", 2), 2);
        let kept: Vec<usize> = (0..10)
            .filter(|&i| rows[i].label("toxic") == Some(true))
            .collect();
        assert_eq!(kept, vec![0, 4]);
        assert_eq!(
            rows.iter()
                .filter(|m| m.label("toxic") == Some(false))
                .count(),
            5
        );
        assert_eq!(keep_positives(&mut rows, "toxic", 50), 2);
    }
}
