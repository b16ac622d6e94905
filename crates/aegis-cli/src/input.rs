//! Messages from a file: `.txt` (one a line), `.csv` (a text column), `.jsonl` (`text` or
//! `question`). A bad row is reported with its line number and the rest go on.

use std::path::Path;

use anyhow::{bail, Context, Result};

/// One row of input: its line number and either the text or why it is unusable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub line: u64,
    pub text: std::result::Result<String, String>,
}

pub fn read_rows(path: &Path, column: Option<&str>) -> Result<Vec<Row>> {
    let extension = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_lowercase)
        .unwrap_or_default();
    let raw = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let content =
        String::from_utf8(raw).with_context(|| format!("{} is not UTF-8 text", path.display()))?;
    let content = content.strip_prefix('\u{feff}').unwrap_or(&content);
    match extension.as_str() {
        "txt" => Ok(txt_rows(content)),
        "jsonl" | "ndjson" => Ok(jsonl_rows(content)),
        "csv" => csv_rows(path, content, column),
        other => bail!(
            "{}: unsupported file type {:?}; use .txt (one message a line), .csv or .jsonl",
            path.display(),
            other
        ),
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
        .with_context(|| format!("{}: cannot read the CSV header", path.display()))?
        .clone();
    let index = match column {
        Some(name) => headers.iter().position(|h| h.trim() == name),
        None => headers
            .iter()
            .position(|h| h.trim() == "text")
            .or_else(|| headers.iter().position(|h| h.trim() == "question")),
    };
    let Some(index) = index else {
        bail!(
            "{}: no column {}; the header has: {}",
            path.display(),
            column
                .map(|c| format!("{c:?}"))
                .unwrap_or_else(|| "\"text\" or \"question\"".to_string()),
            headers.iter().collect::<Vec<_>>().join(", ")
        );
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

    fn rows(name: &str, content: &str, column: Option<&str>) -> Result<Vec<Row>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join(name);
        std::fs::write(&path, content)?;
        read_rows(&path, column)
    }

    #[test]
    fn reads_jsonl_and_reports_bad_lines() -> Result<()> {
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
    fn reads_csv_columns_by_name() -> Result<()> {
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
    fn reads_txt_lines_and_refuses_unknown_types() -> Result<()> {
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
