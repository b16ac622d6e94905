//! Labelled datasets: JSON Lines in the evaluation schema, or CSV with one column per validator.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use aegis_guard::LabelledMessage;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{EvalError, Result};

/// A message with its labels and where it sits in the file (a line for JSONL, a record for CSV,
/// both 1-based), so every figure in a report can be traced back to a row a person can open.
#[derive(Debug, Clone, PartialEq)]
pub struct DatasetRow {
    pub row: usize,
    pub message: LabelledMessage,
}

/// Which rows of the file were evaluated: all, the first `limit`, or a seeded shuffle's first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Sample {
    pub limit: Option<usize>,
    #[cfg_attr(feature = "ts", ts(type = "number | null"))]
    pub seed: Option<u64>,
}

#[derive(Debug, Clone)]
pub struct Dataset {
    pub path: PathBuf,
    /// sha256 of the file's bytes: two runs are comparable only on the same file and sample.
    pub sha256: String,
    /// Rows in the file, before sampling.
    pub file_rows: usize,
    pub sample: Sample,
    pub rows: Vec<DatasetRow>,
}

impl Dataset {
    /// Reads `path` as JSONL (`.jsonl`, `.json`, `.ndjson`) or CSV (`.csv`). Any malformed row is
    /// an error naming the row: a metric over a silently shortened set would mislead.
    pub fn load(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|source| EvalError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let problem = |problem: String| EvalError::Dataset {
            path: path.to_path_buf(),
            problem,
        };
        let text =
            std::str::from_utf8(&bytes).map_err(|e| problem(format!("not UTF-8 text ({e})")))?;
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let extension = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        let rows = match extension.as_deref() {
            Some("jsonl" | "json" | "ndjson") => parse_jsonl(text),
            Some("csv") => parse_csv(text),
            _ => Err(
                "unknown dataset format: use .jsonl (the evaluation schema) or .csv (a text column and one column per validator)"
                    .to_string(),
            ),
        }
        .map_err(problem)?;
        if rows.is_empty() {
            return Err(problem("the dataset has no rows".into()));
        }
        Ok(Self {
            path: path.to_path_buf(),
            sha256: Sha256::digest(&bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect(),
            file_rows: rows.len(),
            sample: Sample::default(),
            rows,
        })
    }

    /// Keeps `limit` rows: the first ones, or with a seed a reproducible random choice.
    pub fn sampled(mut self, sample: Sample) -> Self {
        if let Some(seed) = sample.seed {
            shuffle(&mut self.rows, seed);
        }
        if let Some(limit) = sample.limit {
            self.rows.truncate(limit);
        }
        // Rows keep file order whatever the sample, so reports read top to bottom like the file.
        self.rows.sort_by_key(|r| r.row);
        self.sample = sample;
        self
    }

    pub fn name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| self.path.display().to_string())
    }

    /// Validator keys with at least one label, in first-seen order.
    pub fn labelled_keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = Vec::new();
        for row in &self.rows {
            for (key, label) in &row.message.labels {
                if label.is_some() && !keys.contains(key) {
                    keys.push(key.clone());
                }
            }
        }
        keys
    }
}

fn parse_jsonl(text: &str) -> std::result::Result<Vec<DatasetRow>, String> {
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line_number = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let message: LabelledMessage = serde_json::from_str(line).map_err(|e| {
            format!("line {line_number}: not a row of the evaluation schema ({e}); each line is {{\"text\": ..., \"labels\": {{\"spam\": true|false|null, ...}}}}")
        })?;
        check_row(&message).map_err(|p| format!("line {line_number}: {p}"))?;
        rows.push(DatasetRow {
            row: line_number,
            message,
        });
    }
    Ok(rows)
}

/// Columns with these names describe the row; every other column is a validator's label.
const DESCRIPTIVE_COLUMNS: [&str; 4] = ["id", "text", "lang", "source"];

fn parse_csv(text: &str) -> std::result::Result<Vec<DatasetRow>, String> {
    let mut reader = csv::ReaderBuilder::new()
        .flexible(false)
        .from_reader(text.as_bytes());
    let headers: Vec<String> = reader
        .headers()
        .map_err(|e| format!("unreadable header: {e}"))?
        .iter()
        .map(|h| h.trim().to_string())
        .collect();
    let column = |name: &str| headers.iter().position(|h| h.eq_ignore_ascii_case(name));
    let text_column = column("text").ok_or("the CSV needs a \"text\" column")?;
    let (id_column, lang_column, source_column) = (column("id"), column("lang"), column("source"));
    let label_columns: Vec<(usize, String)> = headers
        .iter()
        .enumerate()
        .filter(|(_, h)| {
            !DESCRIPTIVE_COLUMNS
                .iter()
                .any(|d| h.eq_ignore_ascii_case(d))
        })
        .map(|(i, h)| (i, h.clone()))
        .collect();
    if label_columns.is_empty() {
        return Err("the CSV has no label column: add one per validator (spam, toxic, ...) holding true, false or empty".into());
    }
    let mut rows = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let record_number = i + 1;
        let record = record.map_err(|e| format!("record {record_number}: {e}"))?;
        let field = |c: Option<usize>| {
            c.and_then(|c| record.get(c))
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(String::from)
        };
        let mut labels = BTreeMap::new();
        for (c, key) in &label_columns {
            let value = record.get(*c).unwrap_or("");
            let label = parse_label(value).ok_or_else(|| {
                format!("record {record_number}, column {key}: {value:?} is not a label (use true/false, 1/0, yes/no, or leave it empty for unknown)")
            })?;
            labels.insert(key.clone(), label);
        }
        let message = LabelledMessage {
            id: field(id_column),
            text: record.get(text_column).unwrap_or("").to_string(),
            lang: field(lang_column),
            labels,
            source: field(source_column),
            kind: None,
        };
        check_row(&message).map_err(|p| format!("record {record_number}: {p}"))?;
        rows.push(DatasetRow {
            row: record_number,
            message,
        });
    }
    Ok(rows)
}

fn parse_label(value: &str) -> Option<Option<bool>> {
    match value.trim().to_ascii_lowercase().as_str() {
        "" | "null" | "none" | "na" | "n/a" | "?" => Some(None),
        "true" | "1" | "yes" | "y" | "t" => Some(Some(true)),
        "false" | "0" | "no" | "n" | "f" => Some(Some(false)),
        _ => None,
    }
}

fn check_row(message: &LabelledMessage) -> std::result::Result<(), String> {
    if message.text.trim().is_empty() {
        return Err("the text is empty".into());
    }
    if let Some(lang) = &message.lang {
        if lang.trim().is_empty() {
            return Err("lang is empty; leave it out to detect the language".into());
        }
    }
    Ok(())
}

/// Fisher-Yates driven by splitmix64: tiny, and the same seed gives the same sample on every
/// platform and version (a library RNG would not promise that).
fn shuffle<T>(items: &mut [T], seed: u64) {
    let mut state = seed;
    let mut next = || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    for i in (1..items.len()).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        items.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, content: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(name);
        std::fs::write(&path, content).expect("write");
        (dir, path)
    }

    #[test]
    fn jsonl_rows_keep_their_line_numbers_and_null_labels() {
        let (_dir, path) = write(
            "set.jsonl",
            "{\"id\":\"a\",\"text\":\"hello\",\"lang\":\"en\",\"labels\":{\"spam\":false,\"toxic\":null}}\n\n{\"text\":\"WIN NOW\",\"labels\":{\"spam\":true}}\n",
        );
        let set = Dataset::load(&path).expect("loads");
        assert_eq!(set.rows.len(), 2);
        assert_eq!(set.rows[1].row, 3);
        assert_eq!(set.rows[0].message.label("toxic"), None);
        assert_eq!(set.labelled_keys(), vec!["spam".to_string()]);
        assert_eq!(set.sha256.len(), 64);
    }

    #[test]
    fn csv_label_columns_accept_common_spellings_and_blanks() {
        let (_dir, path) = write(
            "set.csv",
            "text,lang,spam,toxic\n\"Buy now, cheap\",en,yes,\nyou idiot,en,0,TRUE\n",
        );
        let set = Dataset::load(&path).expect("loads");
        assert_eq!(set.rows[0].message.text, "Buy now, cheap");
        assert_eq!(set.rows[0].message.label("spam"), Some(true));
        assert_eq!(set.rows[0].message.label("toxic"), None);
        assert_eq!(set.rows[1].message.label("toxic"), Some(true));
        assert_eq!(set.rows[1].message.label("spam"), Some(false));
    }

    #[test]
    fn bad_files_name_the_row_and_the_fix() {
        let cases = [
            (
                "a.jsonl",
                "{\"text\":\"x\",\"labels\":{\"spam\":\"maybe\"}}\n",
                "line 1",
            ),
            ("b.jsonl", "not json\n", "line 1"),
            ("c.jsonl", "{\"text\":\"  \",\"labels\":{}}\n", "empty"),
            ("d.csv", "message,spam\nhi,1\n", "\"text\" column"),
            ("e.csv", "text,spam\nhi,perhaps\n", "record 1, column spam"),
            ("f.csv", "text,lang\nhi,en\n", "no label column"),
            ("g.txt", "hello\n", "unknown dataset format"),
            ("h.jsonl", "\n", "no rows"),
        ];
        for (name, content, expected) in cases {
            let (_dir, path) = write(name, content);
            let error = Dataset::load(&path).expect_err(name).to_string();
            assert!(error.contains(expected), "{name}: {error}");
        }
    }

    #[test]
    fn a_seeded_sample_is_reproducible_and_keeps_file_order() {
        let content: String = (0..50)
            .map(|i| format!("{{\"text\":\"message {i}\",\"labels\":{{\"spam\":false}}}}\n"))
            .collect();
        let (_dir, path) = write("set.jsonl", &content);
        let sample = Sample {
            limit: Some(10),
            seed: Some(7),
        };
        let a = Dataset::load(&path).expect("loads").sampled(sample);
        let b = Dataset::load(&path).expect("loads").sampled(sample);
        let rows = |d: &Dataset| d.rows.iter().map(|r| r.row).collect::<Vec<_>>();
        assert_eq!(rows(&a), rows(&b));
        assert_eq!(a.rows.len(), 10);
        assert!(rows(&a).windows(2).all(|w| w[0] < w[1]));
        assert_ne!(rows(&a), (1..=10).collect::<Vec<_>>());
        let other = Dataset::load(&path).expect("loads").sampled(Sample {
            limit: Some(10),
            seed: Some(8),
        });
        assert_ne!(rows(&a), rows(&other));
        assert_eq!(a.file_rows, 50);
    }
}
