//! Validator templates as prompt authors edit them: listing every file (broken ones too, with
//! the line at fault), saving (validated, written atomically, versioned) and trying an edit.

use std::path::{Path, PathBuf};

use aegis_guard::{GuardError, Validator};
use serde::Serialize;

use crate::error::ConsoleError;
use crate::settings::write_atomically;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct TemplateFile {
    pub key: String,
    pub path: String,
    pub content: String,
    /// Parsed fields, when the file is valid.
    pub name: Option<String>,
    pub threshold: Option<f32>,
    pub content_hash: Option<String>,
    /// Why the file is not in use, and where.
    pub problem: Option<TemplateProblem>,
    /// "head" when a learned head scores it, "prompt" when the prompt's P(Yes) does, "off"
    /// when the running guard does not have it (broken, or not loaded yet).
    pub scored_by: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct TemplateProblem {
    pub message: String,
    pub line: Option<u32>,
}

/// Keys are file stems of letters, digits and `_`: nothing else can name a file here.
pub fn template_path(dir: &Path, key: &str) -> Result<PathBuf, ConsoleError> {
    if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(ConsoleError::Invalid(format!(
            "{key:?} is not a validator key (letters, digits and _ only)"
        )));
    }
    Ok(dir.join(format!("{key}.txt")))
}

/// Parses `content` as the template `key` would be, turning a refusal into an error that names
/// its line.
pub fn parse(dir: &Path, key: &str, content: &str) -> Result<Validator, ConsoleError> {
    let path = template_path(dir, key)?;
    Validator::parse(&path, content).map_err(|e| match e {
        GuardError::Template { problem, line, .. } => ConsoleError::Template {
            key: key.to_string(),
            line,
            message: problem,
        },
        other => ConsoleError::Guard(other),
    })
}

/// Every `*.txt` in `dir`, sorted by key.
pub fn list(dir: &Path) -> Result<Vec<(String, PathBuf, String)>, ConsoleError> {
    let entries = std::fs::read_dir(dir).map_err(|source| ConsoleError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut files: Vec<(String, PathBuf, String)> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .filter_map(|p| {
            let key = p.file_stem()?.to_str()?.to_string();
            let content = std::fs::read_to_string(&p).unwrap_or_default();
            Some((key, p, content))
        })
        .collect();
    files.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(files)
}

/// Validates and writes a template; returns the parsed validator.
pub fn save(dir: &Path, key: &str, content: &str) -> Result<Validator, ConsoleError> {
    let validator = parse(dir, key, content)?;
    write_atomically(&validator.path, content.as_bytes())?;
    Ok(validator)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "---\nname: Spam\nthreshold: 0.5\nrejection:\n  id: Maaf.\n  en: Sorry.\n---\nIs this spam? {{message}}\n";

    #[test]
    fn points_at_the_line_of_a_problem() {
        let dir = Path::new("/tmp");
        assert!(parse(dir, "spam", GOOD).is_ok());
        let cases = [
            (GOOD.replace("threshold: 0.5", "threshold: 2"), 3),
            (GOOD.replace("name: Spam", "name: [unclosed"), 2),
            (GOOD.replace("{{message}}", "no placeholder"), 8),
            (GOOD.replacen("---\n", "", 1), 1),
            (GOOD.replace("spam?", "spam? {{message}} twice"), 8),
        ];
        for (content, line) in cases {
            match parse(dir, "spam", &content) {
                Err(ConsoleError::Template {
                    line: got, message, ..
                }) => {
                    assert_eq!(got, Some(line), "{message}")
                }
                other => panic!("expected a template error, got {other:?}"),
            }
        }
    }

    #[test]
    fn keys_cannot_leave_the_folder() {
        for key in ["../x", "a/b", "", "a.b"] {
            assert!(template_path(Path::new("/t"), key).is_err(), "{key}");
        }
    }

    #[test]
    fn saving_refuses_a_broken_template_and_keeps_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        save(dir.path(), "spam", GOOD).expect("save");
        assert!(save(dir.path(), "spam", "broken").is_err());
        let kept = std::fs::read_to_string(dir.path().join("spam.txt")).expect("read");
        assert_eq!(kept, GOOD);
        assert_eq!(list(dir.path()).expect("list").len(), 1);
    }
}
