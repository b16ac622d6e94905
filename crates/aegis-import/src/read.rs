//! Messages from a file: `.txt` (one a line), `.csv` (a text column), `.jsonl` (`text` or
//! `question`, or a conversation: `messages` in the chat shape, every turn checked in the context
//! of the turns before it). A bad row is reported with its line number and the rest go on.

use std::path::{Path, PathBuf};

use aegis_guard::{GuardInput, ReceivedConversation, TurnsChecked};

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

    /// Each usable row's text with the file's name: the shape a pool of candidates takes.
    pub fn texts_from(&self) -> impl Iterator<Item = (String, String)> + '_ {
        self.rows
            .iter()
            .filter_map(|row| row.text().ok())
            .map(|text| (text.to_string(), self.file_name.clone()))
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

/// One row of input: where it is, and either what to check or why it is unusable. A conversation
/// line gives a row per checked turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub line: u64,
    /// Its place among the file's rows, for resuming: the line, unless the file holds
    /// conversations, whose lines give several rows; then the rows are numbered in order.
    pub position: u64,
    pub input: std::result::Result<GuardInput, String>,
}

impl Row {
    fn at_line(line: u64, input: std::result::Result<GuardInput, String>) -> Self {
        Self {
            line,
            position: line,
            input,
        }
    }

    /// The text checked, or why the row is unusable.
    pub fn text(&self) -> std::result::Result<&str, &str> {
        match &self.input {
            Ok(input) => Ok(input.text()),
            Err(problem) => Err(problem),
        }
    }
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
        .map(|(i, line)| Row::at_line(i as u64 + 1, Ok(GuardInput::message(line))))
        .collect()
}

fn jsonl_rows(content: &str) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut conversations = false;
    for (i, line) in content.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let line_number = i as u64 + 1;
        let value = match serde_json::from_str::<serde_json::Value>(line) {
            Ok(value) => value,
            Err(e) => {
                rows.push(Row::at_line(
                    line_number,
                    Err(format!("not valid JSON: {e}")),
                ));
                continue;
            }
        };
        if let Some(messages) = value.get("messages") {
            conversations = true;
            match conversation_inputs(messages, value.get("turns")) {
                Ok(inputs) => rows.extend(
                    inputs
                        .into_iter()
                        .map(|input| Row::at_line(line_number, Ok(input))),
                ),
                Err(problem) => rows.push(Row::at_line(line_number, Err(problem))),
            }
            continue;
        }
        let text = match ["text", "question"].iter().find_map(|k| value.get(*k)) {
            Some(serde_json::Value::String(s)) => non_empty(s.clone()).map(GuardInput::message),
            Some(_) => Err("the text field is not a string".to_string()),
            None => Err("no \"text\", \"question\" or \"messages\" field".to_string()),
        };
        rows.push(Row::at_line(line_number, text));
    }
    if conversations {
        for (n, row) in rows.iter_mut().enumerate() {
            row.position = n as u64 + 1;
        }
    }
    rows
}

/// A conversation line's turns to check: every turn unless the line says `"turns": "last"`.
fn conversation_inputs(
    messages: &serde_json::Value,
    turns: Option<&serde_json::Value>,
) -> std::result::Result<Vec<GuardInput>, String> {
    let checked = match turns.and_then(|t| t.as_str()) {
        None | Some("all") => TurnsChecked::All,
        Some("last") => TurnsChecked::Last,
        Some(other) => return Err(format!("turns is {other:?}: use all or last")),
    };
    let list = messages
        .as_array()
        .ok_or("messages must be a list of {\"role\", \"content\"} turns")?;
    let inputs = ReceivedConversation::parse(list)
        .and_then(|conversation| conversation.inputs(checked))
        .map_err(|e| e.to_string())?;
    Ok(inputs)
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
                    .map(|t| non_empty(t.to_string()).map(GuardInput::message))
                    .unwrap_or_else(|| Err(format!("the row has no field {}", index + 1))),
            ),
            Err(e) => (
                e.position().map(|p| p.line()).unwrap_or(i as u64 + 2),
                Err(format!("bad CSV: {e}")),
            ),
        };
        rows.push(Row::at_line(line, text));
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
        assert_eq!(by_label.rows[0].text(), Ok("0"));
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
        assert_eq!((got[0].line, got[0].text()), (1, Ok("halo")));
        assert!(got[1]
            .text()
            .is_err_and(|e| e.starts_with("not valid JSON")));
        assert_eq!(got[2].line, 4);
        assert_eq!(
            got[2].text(),
            Err("no \"text\", \"question\" or \"messages\" field")
        );
        assert_eq!(got[3].text(), Err("the text is empty"));
        assert_eq!(got[4].text(), Err("the text field is not a string"));
        Ok(())
    }

    #[test]
    fn a_conversation_line_gives_a_row_per_turn_each_with_its_context() -> TestResult {
        let got = rows(
            "c.jsonl",
            concat!(
                "{\"text\":\"halo\"}\n",
                "{\"messages\":[{\"role\":\"system\",\"content\":\"be kind\"},{\"role\":\"user\",\"content\":\"kamu tinggal di mana?\"},{\"role\":\"user\",\"content\":\"aku tahu sekolahmu\"}]}\n",
                "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\",\"content\":\"b\"}],\"turns\":\"last\"}\n",
                "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"bot\",\"content\":\"b\"}]}\n",
            ),
            None,
        )?;
        let lines: Vec<(u64, u64)> = got.iter().map(|r| (r.line, r.position)).collect();
        assert_eq!(lines, [(1, 1), (2, 2), (2, 3), (3, 4), (4, 5)]);
        let threat = got[2].input.as_ref().map_err(|e| e.clone())?;
        assert_eq!(threat.index, 2, "positions count the system turn");
        assert_eq!(threat.context.len(), 1);
        assert_eq!(got[3].input.as_ref().map(|i| i.index), Ok(1));
        assert!(got[4]
            .text()
            .is_err_and(|e| e.starts_with("turn 1: role \"bot\"")));
        Ok(())
    }

    #[test]
    fn reads_csv_columns_by_name() -> TestResult {
        let got = rows("m.csv", "id,question\n1,\"halo, apa kabar\"\n2,\n", None)?;
        assert_eq!((got[0].line, got[0].text()), (2, Ok("halo, apa kabar")));
        assert_eq!((got[1].line, got[1].text()), (3, Err("the text is empty")));
        let named = rows("m.csv", "a,msg\n1,hi\n", Some("msg"))?;
        assert_eq!(named[0].text(), Ok("hi"));
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
        let lines: Vec<(u64, std::result::Result<&str, &str>)> =
            got.iter().map(|r| (r.line, r.text())).collect();
        assert_eq!(lines, [(1, Ok("one")), (3, Ok(" two "))]);
        let err = rows("m.xlsx", "x", None).unwrap_err().to_string();
        assert!(err.contains("unsupported file type \"xlsx\""), "{err}");
        Ok(())
    }
}
