//! Messages from a file: `.txt` (one a line), `.csv` (a text column), `.jsonl` (`text` or
//! `question`). A bad row is reported with its line number and the rest go on.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0} is not UTF-8 text")]
    NotUtf8(PathBuf),
    #[error("{path}: unsupported file type {extension:?}; use .txt (one message a line), .csv or .jsonl")]
    UnsupportedType { path: PathBuf, extension: String },
    #[error("{path}: cannot read the CSV header: {message}")]
    CsvHeader { path: PathBuf, message: String },
    #[error("{path}: no column {wanted}; the header has: {found}")]
    NoColumn {
        path: PathBuf,
        wanted: String,
        found: String,
    },
}

pub type Result<T, E = ReadError> = std::result::Result<T, E>;

/// A file of messages, read once: its rows and what identifies its content.
#[derive(Debug, Clone)]
pub struct MessageFile {
    pub path: PathBuf,
    pub file_name: String,
    /// sha256 of the bytes, plus the CSV column when one was chosen: the same file imported again
    /// resumes its batch, while the same file with another column is a different import.
    pub identity: String,
    pub rows: Vec<Row>,
}

impl MessageFile {
    pub fn read(path: &Path, column: Option<&str>) -> Result<Self> {
        let bytes = read_bytes(path)?;
        let sha: String = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let rows = parse_rows(path, bytes, column)?;
        Ok(Self {
            path: path.to_path_buf(),
            file_name: path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            identity: match column {
                Some(column) if extension(path) == "csv" => format!("{sha}:{column}"),
                _ => sha,
            },
            rows,
        })
    }
}

fn read_bytes(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| ReadError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn extension(path: &Path) -> String {
    path.extension()
        .and_then(|e| e.to_str())
        .map(str::to_lowercase)
        .unwrap_or_default()
}

/// A CSV file's header, for choosing the text column; `None` for TXT and JSONL, which have none.
pub fn csv_columns(path: &Path) -> Result<Option<Vec<String>>> {
    match extension(path).as_str() {
        "csv" => {
            let bytes = read_bytes(path)?;
            let mut reader = csv::ReaderBuilder::new()
                .flexible(true)
                .from_reader(bytes.as_slice());
            let headers = reader.headers().map_err(|e| ReadError::CsvHeader {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?;
            Ok(Some(headers.iter().map(|h| h.trim().to_string()).collect()))
        }
        "txt" | "jsonl" | "ndjson" => Ok(None),
        other => Err(ReadError::UnsupportedType {
            path: path.to_path_buf(),
            extension: other.to_string(),
        }),
    }
}

/// One row of input: its line number and either the text or why it is unusable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub line: u64,
    pub text: std::result::Result<String, String>,
}

pub fn read_rows(path: &Path, column: Option<&str>) -> Result<Vec<Row>> {
    parse_rows(path, read_bytes(path)?, column)
}

fn parse_rows(path: &Path, raw: Vec<u8>, column: Option<&str>) -> Result<Vec<Row>> {
    let extension = extension(path);
    if !matches!(extension.as_str(), "txt" | "jsonl" | "ndjson" | "csv") {
        return Err(ReadError::UnsupportedType {
            path: path.to_path_buf(),
            extension,
        });
    }
    let content = String::from_utf8(raw).map_err(|_| ReadError::NotUtf8(path.to_path_buf()))?;
    let content = content.strip_prefix('\u{feff}').unwrap_or(&content);
    match extension.as_str() {
        "txt" => Ok(txt_rows(content)),
        "csv" => csv_rows(path, content, column),
        _ => Ok(jsonl_rows(content)),
    }
}

fn non_empty(text: String) -> std::result::Result<String, String> {
    if text.trim().is_empty() {
        Err("the text is empty".to_string())
    } else {
        Ok(text)
    }
}

/// Blank lines separate messages; they are not rows.
fn txt_rows(content: &str) -> Vec<Row> {
    content
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| Row {
            line: i as u64 + 1,
            text: Ok(line.to_string()),
        })
        .collect()
}

fn jsonl_rows(content: &str) -> Vec<Row> {
    content
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            let text = match serde_json::from_str::<serde_json::Value>(line) {
                Err(e) => Err(format!("not valid JSON: {e}")),
                Ok(value) => match ["text", "question"].iter().find_map(|k| value.get(*k)) {
                    Some(serde_json::Value::String(s)) => non_empty(s.clone()),
                    Some(_) => Err("the text field is not a string".to_string()),
                    None => Err("no \"text\" or \"question\" field".to_string()),
                },
            };
            Row {
                line: i as u64 + 1,
                text,
            }
        })
        .collect()
}

fn csv_rows(path: &Path, content: &str, column: Option<&str>) -> Result<Vec<Row>> {
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .from_reader(content.as_bytes());
    let headers = reader
        .headers()
        .map_err(|e| ReadError::CsvHeader {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?
        .clone();
    let index = match column {
        Some(name) => headers.iter().position(|h| h.trim() == name),
        None => headers
            .iter()
            .position(|h| h.trim() == "text")
            .or_else(|| headers.iter().position(|h| h.trim() == "question")),
    };
    let Some(index) = index else {
        return Err(ReadError::NoColumn {
            path: path.to_path_buf(),
            wanted: column
                .map(|c| format!("{c:?}"))
                .unwrap_or_else(|| "\"text\" or \"question\"".to_string()),
            found: headers.iter().collect::<Vec<_>>().join(", "),
        });
    };
    let mut rows = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let (line, text) = match record {
            Ok(record) => (
                record.position().map(|p| p.line()).unwrap_or(i as u64 + 2),
                record
                    .get(index)
                    .map(|t| non_empty(t.to_string()))
                    .unwrap_or_else(|| Err(format!("the row has no field {}", index + 1))),
            ),
            Err(e) => (
                e.position().map(|p| p.line()).unwrap_or(i as u64 + 2),
                Err(format!("bad CSV: {e}")),
            ),
        };
        rows.push(Row { line, text });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

    fn rows(name: &str, content: &str, column: Option<&str>) -> Result<Vec<Row>> {
        let dir = tempfile::tempdir().map_err(|source| ReadError::Io {
            path: name.into(),
            source,
        })?;
        let path = dir.path().join(name);
        std::fs::write(&path, content).map_err(|source| ReadError::Io {
            path: path.clone(),
            source,
        })?;
        read_rows(&path, column)
    }

    #[test]
    fn lists_csv_columns_and_identifies_by_content_and_column() -> TestResult {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("m.csv");
        std::fs::write(&path, "id, text ,label\n1,halo,0\n")?;
        assert_eq!(
            csv_columns(&path)?,
            Some(vec!["id".into(), "text".into(), "label".into()])
        );
        let by_text = MessageFile::read(&path, Some("text"))?;
        let by_label = MessageFile::read(&path, Some("label"))?;
        assert_ne!(by_text.identity, by_label.identity);
        assert_eq!(by_text.file_name, "m.csv");
        assert_eq!(by_label.rows[0].text, Ok("0".into()));
        let txt = dir.path().join("m.txt");
        std::fs::write(&txt, "a\n")?;
        assert_eq!(csv_columns(&txt)?, None);
        Ok(())
    }

    #[test]
    fn reads_jsonl_and_reports_bad_lines() -> TestResult {
        let got = rows(
            "m.jsonl",
            "{\"text\":\"halo\"}\nnot json\n\n{\"id\":1}\n{\"question\":\"  \"}\n{\"text\":3}\n",
            None,
        )?;
        assert_eq!(
            got[0],
            Row {
                line: 1,
                text: Ok("halo".into())
            }
        );
        assert!(got[1]
            .text
            .as_ref()
            .is_err_and(|e| e.starts_with("not valid JSON")));
        assert_eq!(got[2].line, 4);
        assert_eq!(got[2].text, Err("no \"text\" or \"question\" field".into()));
        assert_eq!(got[3].text, Err("the text is empty".into()));
        assert_eq!(got[4].text, Err("the text field is not a string".into()));
        Ok(())
    }

    #[test]
    fn reads_csv_columns_by_name() -> TestResult {
        let got = rows("m.csv", "id,question\n1,\"halo, apa kabar\"\n2,\n", None)?;
        assert_eq!(
            got[0],
            Row {
                line: 2,
                text: Ok("halo, apa kabar".into())
            }
        );
        assert_eq!(
            got[1],
            Row {
                line: 3,
                text: Err("the text is empty".into())
            }
        );
        let named = rows("m.csv", "a,msg\n1,hi\n", Some("msg"))?;
        assert_eq!(named[0].text, Ok("hi".into()));
        let err = rows("m.csv", "a,b\n1,2\n", None).unwrap_err().to_string();
        assert!(
            err.contains("no column \"text\" or \"question\"; the header has: a, b"),
            "{err}"
        );
        Ok(())
    }

    #[test]
    fn reads_txt_lines_and_refuses_unknown_types() -> TestResult {
        let got = rows("m.txt", "one\n\n two \n", None)?;
        assert_eq!(
            got,
            vec![
                Row {
                    line: 1,
                    text: Ok("one".into())
                },
                Row {
                    line: 3,
                    text: Ok(" two ".into())
                }
            ]
        );
        let err = rows("m.xlsx", "x", None).unwrap_err().to_string();
        assert!(err.contains("unsupported file type \"xlsx\""), "{err}");
        Ok(())
    }
}
