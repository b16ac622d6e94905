//! Validator templates: `prompt_guard/<key>.txt`, a YAML front matter between `---` lines, then
//! the prompt body with exactly one `{{message}}` placeholder and at most one `{{context}}` before
//! it, where the turns before a conversation's checked turn go.

use std::path::{Path, PathBuf};

use aegis_engine::Segment;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::context::ContextReading;
use crate::error::{GuardError, Result};
use crate::exclamation::ExclamationReading;
use crate::input::{Role, Turn};
use crate::language::Language;
use crate::mention::QuoteReading;

pub const PLACEHOLDER: &str = "{{message}}";
/// Where the earlier turns of a conversation go; optional, and only before the message.
pub const CONTEXT_PLACEHOLDER: &str = "{{context}}";

/// Whose turns a validator checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum AppliesTo {
    User,
    Assistant,
    #[default]
    Both,
}

impl AppliesTo {
    pub fn covers(self, role: Role) -> bool {
        matches!(
            (self, role),
            (Self::Both, _) | (Self::User, Role::User) | (Self::Assistant, Role::Assistant)
        )
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct FrontMatter {
    name: String,
    #[serde(default)]
    description: String,
    /// Position in verdicts and in the original API's `execution_per_step`; ties sort by key.
    #[serde(default = "default_order")]
    order: i64,
    #[serde(default = "default_threshold")]
    threshold: f32,
    rejection: Rejection,
    #[serde(default)]
    applies_to: AppliesTo,
    #[serde(default)]
    context: ContextReading,
    #[serde(default)]
    quotes: QuoteReading,
    #[serde(default)]
    exclamations: ExclamationReading,
}

fn default_order() -> i64 {
    i64::MAX
}

fn default_threshold() -> f32 {
    0.5
}

#[derive(Debug, Clone, Deserialize, PartialEq, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Rejection {
    /// Indonesian.
    pub id: String,
    /// English.
    pub en: String,
}

impl Rejection {
    pub fn for_language(&self, language: Language) -> &str {
        match language {
            Language::Indonesian => &self.id,
            Language::English => &self.en,
        }
    }
}

/// One validator, parsed and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Validator {
    /// File stem: `spam`, `financial_advice`. Also the step name in the original API.
    pub key: String,
    pub name: String,
    pub description: String,
    pub order: i64,
    pub threshold: f32,
    pub rejection: Rejection,
    /// The roles whose turns it checks; a turn by another role skips it.
    pub applies_to: AppliesTo,
    /// What its head reads of a turn that has context.
    pub context_reading: ContextReading,
    /// How its head reads quoted passages in a user's question or report.
    pub quote_reading: QuoteReading,
    /// How its head reads a user's opening exclamation ("Shit, …").
    pub exclamation_reading: ExclamationReading,
    /// Template text before and after the placeholder (`before` may hold `{{context}}`).
    before: String,
    after: String,
    /// The whole file, as history keeps every template version a verdict used.
    pub content: String,
    /// sha256 of the whole file, recorded with every verdict.
    pub content_hash: String,
    pub path: PathBuf,
}

impl Validator {
    pub fn parse(path: &Path, content: &str) -> Result<Self> {
        let problem_at = |problem: String, line: Option<usize>| GuardError::Template {
            path: path.to_path_buf(),
            problem,
            line: line.map(|l| l as u32),
        };
        let problem = |problem: String| problem_at(problem, None);
        // Lines are 1-based and counted in the file as written (a BOM is not a line).
        let line_where = |pred: &dyn Fn(&str) -> bool| {
            content
                .lines()
                .position(|l| pred(l.trim_start_matches('\u{feff}')))
                .map(|i| i + 1)
        };
        let last_line = content.lines().count().max(1);
        let field_line = |field: &str| line_where(&|l: &str| l.starts_with(&format!("{field}:")));
        let key = path
            .file_stem()
            .and_then(|s| s.to_str())
            .filter(|k| !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
            .ok_or_else(|| {
                problem(
                    "the file name must be a key of letters, digits and _ (e.g. spam.txt)".into(),
                )
            })?
            .to_string();
        let content = content.strip_prefix('\u{feff}').unwrap_or(content);
        let rest = content
            .strip_prefix("---\n")
            .or_else(|| content.strip_prefix("---\r\n"))
            .ok_or_else(|| {
                problem_at(
                    "must start with a front matter block opened by a --- line".into(),
                    Some(1),
                )
            })?;
        let (yaml, body) = split_front_matter(rest).ok_or_else(|| {
            problem_at(
                "the front matter is not closed by a --- line".into(),
                Some(last_line),
            )
        })?;
        let front: FrontMatter = serde_yaml::from_str(yaml).map_err(|e| {
            // serde_yaml counts lines inside the front matter, which starts on line 2.
            let line = e.location().map(|at| at.line() + 1);
            problem_at(format!("bad front matter: {e}"), line)
        })?;
        if !(front.threshold > 0.0 && front.threshold < 1.0) {
            return Err(problem_at(
                format!(
                    "threshold must be between 0 and 1 (exclusive), not {}",
                    front.threshold
                ),
                field_line("threshold"),
            ));
        }
        if front.name.trim().is_empty() {
            return Err(problem_at(
                "name must not be empty".into(),
                field_line("name"),
            ));
        }
        if front.rejection.id.trim().is_empty() || front.rejection.en.trim().is_empty() {
            return Err(problem_at(
                "rejection needs a non-empty message for both id and en".into(),
                field_line("rejection"),
            ));
        }
        let placeholders = body.matches(PLACEHOLDER).count();
        let (before, after) = match placeholders {
            1 => body.split_once(PLACEHOLDER).unwrap_or((body, "")),
            0 => {
                return Err(problem_at(
                    format!("the prompt has no {PLACEHOLDER} placeholder"),
                    Some(last_line),
                ))
            }
            n => {
                // The second placeholder is the one to remove.
                let second = content
                    .match_indices(PLACEHOLDER)
                    .nth(1)
                    .map(|(at, _)| content[..at].matches('\n').count() + 1);
                return Err(problem_at(
                    format!("the prompt has {n} {PLACEHOLDER} placeholders; it needs exactly one"),
                    second,
                ));
            }
        };
        match before.matches(CONTEXT_PLACEHOLDER).count() + after.matches(CONTEXT_PLACEHOLDER).count() {
            0 => {}
            1 if before.contains(CONTEXT_PLACEHOLDER) => {}
            1 => {
                return Err(problem(format!(
                    "{CONTEXT_PLACEHOLDER} must come before {PLACEHOLDER}: the earlier turns are read first"
                )))
            }
            n => {
                return Err(problem(format!(
                    "the prompt has {n} {CONTEXT_PLACEHOLDER} placeholders; it may have one"
                )))
            }
        }
        // The answer is scored at the position right after the template's last token, so the end
        // is normalised: editors disagree on trailing newlines, the model must not see the difference.
        let after = format!("{}\n", after.trim_end());
        Ok(Self {
            key,
            name: front.name,
            description: front.description,
            order: front.order,
            threshold: front.threshold,
            rejection: front.rejection,
            applies_to: front.applies_to,
            context_reading: front.context,
            quote_reading: front.quotes,
            exclamation_reading: front.exclamations,
            before: body_start(before).to_string(),
            after,
            content_hash: hex_sha256(content.as_bytes()),
            content: content.to_string(),
            path: path.to_path_buf(),
        })
    }

    /// sha256 of the template text before the message: all that message-mean features depend on.
    pub fn prefix_hash(&self) -> String {
        hex_sha256(self.before.as_bytes())
    }

    /// sha256 of the prompt body around the message: what answer-position features depend on.
    /// Front-matter edits (threshold, name, rejection text) leave it unchanged.
    pub fn body_hash(&self) -> String {
        hex_sha256(format!("{}{PLACEHOLDER}{}", self.before, self.after).as_bytes())
    }

    /// The file's text with `threshold` in the front matter and everything else byte for byte
    /// as it was (so the prompt, and any head bound to it, are untouched). Only the top-level
    /// `threshold:` line changes; one is added before the closing `---` when there is none.
    pub fn content_with_threshold(&self, threshold: f32) -> Result<String> {
        let refuse = |problem: String| GuardError::Template {
            path: self.path.clone(),
            problem,
            line: None,
        };
        if !(threshold > 0.0 && threshold < 1.0) {
            return Err(refuse(format!(
                "threshold must be between 0 and 1 (exclusive), not {threshold}"
            )));
        }
        // Three decimals: finer than any measurement on a few hundred labelled rows can justify.
        let value = format!("{:.3}", threshold)
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string();
        let mut out = String::with_capacity(self.content.len() + 16);
        let mut lines = self.content.split_inclusive('\n');
        let mut replaced = false;
        if let Some(opening) = lines.next() {
            out.push_str(opening);
        }
        for line in lines.by_ref() {
            if line.trim_end() == "---" {
                if !replaced {
                    out.push_str(&format!("threshold: {value}\n"));
                }
                out.push_str(line);
                break;
            }
            if !replaced && line.starts_with("threshold:") {
                let ending = if line.ends_with("\r\n") { "\r\n" } else { "\n" };
                out.push_str(&format!("threshold: {value}{ending}"));
                replaced = true;
            } else {
                out.push_str(line);
            }
        }
        out.extend(lines);
        let edited = Self::parse(&self.path, &out)?;
        if edited.body_hash() != self.body_hash() || (edited.threshold - threshold).abs() > 1e-3 {
            return Err(refuse(
                "the threshold could not be rewritten in the front matter".into(),
            ));
        }
        Ok(out)
    }

    /// The prompt for one message: template text around the user's text, never mixed.
    pub fn prompt(&self, message: &str) -> Vec<Segment> {
        self.prompt_in_context(message, &[])
    }

    /// The prompt for a turn with the turns before it in `{{context}}` (one `role: content` line
    /// each), where the template has the placeholder. Every turn's content is user text: no
    /// turn can write the template's control tokens.
    pub fn prompt_in_context(&self, message: &str, context: &[Turn]) -> Vec<Segment> {
        let mut segments = Vec::with_capacity(3 + 3 * context.len());
        match self.before.split_once(CONTEXT_PLACEHOLDER) {
            Some((opening, between)) => {
                segments.push(Segment::Template(opening.to_string()));
                for turn in context {
                    segments.push(Segment::Template(format!("{}: ", turn.role.as_str())));
                    segments.push(Segment::User(turn.content.clone()));
                    segments.push(Segment::Template("\n".into()));
                }
                segments.push(Segment::Template(between.to_string()));
            }
            None => segments.push(Segment::Template(self.before.clone())),
        }
        segments.push(Segment::User(message.to_string()));
        segments.push(Segment::Template(self.after.clone()));
        segments
    }
}

/// Splits `yaml\n---\nbody` at the closing `---` line.
fn split_front_matter(rest: &str) -> Option<(&str, &str)> {
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Some((&rest[..offset], &rest[offset + line.len()..]));
        }
        offset += line.len();
    }
    None
}

/// The body starts on the line after the front matter; a blank line there is formatting.
fn body_start(before: &str) -> &str {
    before.trim_start_matches(['\n', '\r'])
}

pub(crate) fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The result of reading a templates folder: the validators that parsed, and why the others did not.
#[derive(Debug)]
pub struct LoadedValidators {
    pub validators: Vec<Validator>,
    pub errors: Vec<GuardError>,
}

/// Reads every `*.txt` in `dir`. A broken file is reported and skipped; the rest keep working.
pub fn load_validators(dir: &Path) -> Result<LoadedValidators> {
    let entries = std::fs::read_dir(dir).map_err(|source| GuardError::TemplatesDir {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("txt"))
        .collect();
    paths.sort();
    let mut validators = Vec::new();
    let mut errors = Vec::new();
    for path in paths {
        let parsed = std::fs::read(&path)
            .map_err(|e| GuardError::Template {
                path: path.clone(),
                problem: format!("cannot read: {e}"),
                line: None,
            })
            .and_then(|bytes| {
                String::from_utf8(bytes).map_err(|_| GuardError::Template {
                    path: path.clone(),
                    problem: "not valid UTF-8 text".into(),
                    line: None,
                })
            })
            .and_then(|text| Validator::parse(&path, &text));
        match parsed {
            Ok(v) => validators.push(v),
            Err(e) => errors.push(e),
        }
    }
    validators.sort_by(|a, b| (a.order, &a.key).cmp(&(b.order, &b.key)));
    Ok(LoadedValidators { validators, errors })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "---\nname: Spam\nthreshold: 0.4\nrejection:\n  id: Maaf.\n  en: Sorry.\n---\n<start_of_turn>user\nMessage: {{message}}\nSpam?<end_of_turn>\n<start_of_turn>model\n\n\n";

    fn parse(content: &str) -> Result<Validator> {
        Validator::parse(Path::new("prompt_guard/spam.txt"), content)
    }

    fn problem(content: &str) -> String {
        parse(content).unwrap_err().to_string()
    }

    #[test]
    fn parses_a_good_template_and_renders_segments() -> Result<()> {
        let v = parse(GOOD)?;
        assert_eq!(v.key, "spam");
        assert_eq!(v.threshold, 0.4);
        assert_eq!(
            v.prompt("hi <end_of_turn>"),
            vec![
                Segment::Template("<start_of_turn>user\nMessage: ".into()),
                Segment::User("hi <end_of_turn>".into()),
                Segment::Template("\nSpam?<end_of_turn>\n<start_of_turn>model\n".into()),
            ]
        );
        Ok(())
    }

    #[test]
    fn refuses_missing_and_doubled_placeholders() {
        let none = problem(&GOOD.replace("{{message}}", "x"));
        assert!(
            none.contains("prompt_guard/spam.txt: the prompt has no {{message}} placeholder"),
            "{none}"
        );
        let two = problem(&GOOD.replace("{{message}}", "{{message}} {{message}}"));
        assert!(
            two.contains("has 2 {{message}} placeholders; it needs exactly one"),
            "{two}"
        );
    }

    #[test]
    fn refuses_bad_front_matter() {
        let unknown = problem(&GOOD.replace("threshold: 0.4", "threshold: 0.4\ncolour: red"));
        assert!(
            unknown.contains("bad front matter: unknown field `colour`"),
            "{unknown}"
        );
        let unclosed = problem("---\nname: x\n{{message}}");
        assert!(unclosed.contains("not closed by a --- line"), "{unclosed}");
        let none = problem("{{message}}");
        assert!(
            none.contains("must start with a front matter block"),
            "{none}"
        );
        let threshold = problem(&GOOD.replace("0.4", "1.5"));
        assert!(
            threshold.contains("threshold must be between 0 and 1"),
            "{threshold}"
        );
        let no_rejection = problem(&GOOD.replace("rejection:\n  id: Maaf.\n  en: Sorry.\n", ""));
        assert!(
            no_rejection.contains("missing field `rejection`"),
            "{no_rejection}"
        );
        let not_yaml = problem(&GOOD.replace("name: Spam", "name: [unclosed"));
        assert!(not_yaml.contains("bad front matter"), "{not_yaml}");
    }

    #[test]
    fn a_broken_file_is_reported_and_the_others_still_load() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|source| GuardError::TemplatesDir {
            path: "tmp".into(),
            source,
        })?;
        let write =
            |name: &str, text: &str| std::fs::write(dir.path().join(name), text).expect("write");
        write("spam.txt", GOOD);
        write("toxic.txt", &GOOD.replace("{{message}}", ""));
        write("notes.md", "ignored: not a template");
        let loaded = load_validators(dir.path())?;
        assert_eq!(loaded.validators.len(), 1);
        assert_eq!(loaded.errors.len(), 1);
        let err = loaded.errors[0].to_string();
        assert!(
            err.contains("toxic.txt: the prompt has no {{message}} placeholder"),
            "{err}"
        );
        Ok(())
    }

    #[test]
    fn the_shipped_templates_load_and_put_the_message_last() -> Result<()> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../prompt_guard");
        let loaded = load_validators(&dir)?;
        assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
        let keys: Vec<&str> = loaded.validators.iter().map(|v| v.key.as_str()).collect();
        assert_eq!(keys, ["spam", "toxic", "harassment", "financial_advice"]);
        // Everything before the message is a cacheable opening; after it comes only the same
        // short closing, so a verdict computes little more than the message per validator.
        let first = &loaded.validators[0];
        for v in &loaded.validators {
            assert_eq!(v.after, first.after);
            assert!(v.after.len() < 64, "{:?}", v.after);
            assert_eq!(v.before[..200], first.before[..200], "a shared preamble");
        }
        Ok(())
    }

    #[test]
    fn feature_hashes_follow_the_prompt_text_not_the_front_matter() -> Result<()> {
        let v = parse(GOOD)?;
        let rethresholded = parse(&GOOD.replace("0.4", "0.7"))?;
        assert_eq!(v.body_hash(), rethresholded.body_hash());
        assert_ne!(v.content_hash, rethresholded.content_hash);
        let new_question = parse(&GOOD.replace("Spam?", "Is it spam?"))?;
        assert_ne!(v.body_hash(), new_question.body_hash());
        assert_eq!(v.prefix_hash(), new_question.prefix_hash());
        Ok(())
    }

    #[test]
    fn a_new_threshold_changes_one_front_matter_line_and_nothing_else() -> Result<()> {
        let original = "---\nname: Spam\nthreshold: 0.5\nrejection:\n  id: Maaf.\n  en: Sorry.\n---\nthreshold: in the body stays\n{{message}}\n";
        let v = parse(original)?;
        let edited = v.content_with_threshold(0.3127)?;
        assert_eq!(
            edited,
            original.replacen("threshold: 0.5", "threshold: 0.313", 1)
        );
        let reparsed = parse(&edited)?;
        assert_eq!(reparsed.threshold, 0.313);
        assert_eq!(reparsed.body_hash(), v.body_hash());
        // No threshold line: one is added at the end of the front matter.
        let bare =
            parse("---\nname: Spam\nrejection:\n  id: Maaf.\n  en: Sorry.\n---\n{{message}}\n")?;
        let added = bare.content_with_threshold(0.7)?;
        assert!(
            added.contains("  en: Sorry.\nthreshold: 0.7\n---\n"),
            "{added}"
        );
        assert!(v.content_with_threshold(1.0).is_err());
        assert!(v.content_with_threshold(f32::NAN).is_err());
        Ok(())
    }
}
