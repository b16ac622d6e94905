//! Guard logic around a fake model: verdict aggregation, case strings, rejections, errors.
//! The real model is exercised by the CLI's integration tests.

use std::path::Path;
use std::sync::Arc;

use aegis_engine::{EngineError, LanguageModel, ModelInfo, Prompt, Scored, Segment};

use crate::*;

/// Answers each prompt with a fixed score chosen by the validator's question.
struct FakeModel {
    info: ModelInfo,
    scores: Vec<(&'static str, f32)>,
    generated: Option<&'static str>,
}

impl FakeModel {
    fn new(scores: Vec<(&'static str, f32)>) -> Self {
        Self {
            info: ModelInfo {
                id: "fake".into(),
                content_hash: "0".repeat(64),
                device: "cpu".into(),
                weight_format: "dense".into(),
                context_length: 64,
            },
            scores,
            generated: None,
        }
    }
}

fn text_of(prompt: &[Segment]) -> String {
    prompt
        .iter()
        .map(|s| match s {
            Segment::Template(t) | Segment::User(t) => t.as_str(),
        })
        .collect()
}

impl LanguageModel for FakeModel {
    fn info(&self) -> &ModelInfo {
        &self.info
    }
    fn count_user_tokens(&self, text: &str) -> aegis_engine::Result<usize> {
        Ok(text.split_whitespace().count())
    }
    fn count_prompt_tokens(&self, prompt: &[Segment]) -> aegis_engine::Result<usize> {
        Ok(text_of(prompt).split_whitespace().count())
    }
    fn score(&self, prompts: &[Prompt]) -> aegis_engine::Result<Vec<Scored>> {
        prompts
            .iter()
            .map(|p| {
                let tokens = self.count_prompt_tokens(p)?;
                if tokens > self.info.context_length {
                    return Err(EngineError::ContextExceeded {
                        prompt_tokens: tokens,
                        limit: self.info.context_length,
                    });
                }
                let text = text_of(p);
                let p_yes = self
                    .scores
                    .iter()
                    .find(|(marker, _)| text.contains(marker))
                    .map(|(_, s)| *s)
                    .unwrap_or(0.1);
                Ok(Scored {
                    p_yes,
                    elapsed_ms: 1.0,
                })
            })
            .collect()
    }
    fn generate(
        &self,
        _: &[Segment],
        _: usize,
        on_text: &mut dyn FnMut(&str),
    ) -> aegis_engine::Result<String> {
        match self.generated {
            Some(text) => {
                on_text(text);
                Ok(text.to_string())
            }
            None => Err(EngineError::EmptyPrompt),
        }
    }
}

fn validator(key: &str, order: i64) -> Validator {
    let text = format!(
        "---\nname: {key}\norder: {order}\nrejection:\n  id: Maaf {key}.\n  en: Sorry {key}.\n---\nMessage: {{{{message}}}}\nIs it {key}?\n"
    );
    Validator::parse(Path::new(&format!("{key}.txt")), &text).expect("valid template")
}

fn guard(model: FakeModel) -> Guard {
    Guard::new(
        Arc::new(model),
        vec![
            validator("spam", 1),
            validator("toxic", 2),
            validator("harassment", 3),
            validator("financial_advice", 4),
        ],
    )
}

#[test]
fn all_passing_is_aman_with_no_message() {
    let verdict = guard(FakeModel::new(vec![]))
        .check("Bagaimana cara top up saldo?")
        .expect("check");
    assert_eq!(verdict.status, Status::Passed);
    assert_eq!(verdict.case, "aman");
    assert_eq!(verdict.rejection_message, "");
    assert_eq!(verdict.results.len(), 4);
    assert_eq!(verdict.templates.len(), 4);
}

#[test]
fn failures_name_their_keys_in_order_and_answer_in_the_users_language() {
    let model = FakeModel::new(vec![("Is it toxic?", 0.9), ("Is it spam?", 0.7)]);
    let verdict = guard(model)
        .check("dasar kamu bodoh sekali, tidak tahu apa apa")
        .expect("check");
    assert_eq!(verdict.status, Status::Failed);
    assert_eq!(verdict.case, "spam, toxic");
    assert_eq!(verdict.language, Language::Indonesian);
    assert_eq!(verdict.rejection_message, "Maaf spam. Maaf toxic.");
    let english = FakeModel::new(vec![("Is it toxic?", 0.9)]);
    let verdict = guard(english)
        .check("you are so stupid and useless")
        .expect("check");
    assert_eq!(verdict.rejection_message, "Sorry toxic.");
}

#[test]
fn the_threshold_is_a_strict_cut() {
    let model = FakeModel::new(vec![("Is it spam?", 0.5)]);
    let verdict = guard(model).check("hello there").expect("check");
    assert_eq!(verdict.case, "spam", "a score at the threshold fails");
}

#[test]
fn empty_text_is_a_clear_error() {
    let err = guard(FakeModel::new(vec![]))
        .check("  \n ")
        .unwrap_err()
        .to_string();
    assert_eq!(err, "the text is empty: give a message to check");
}

#[test]
fn over_long_text_gives_both_lengths() {
    let err = guard(FakeModel::new(vec![]))
        .check(&"kata ".repeat(100))
        .unwrap_err()
        .to_string();
    assert!(err.contains("it is 100 tokens"), "{err}");
    assert!(
        err.contains("over the model's context of 64 tokens"),
        "{err}"
    );
}

#[test]
fn generated_rejection_falls_back_to_the_template_on_error() {
    let model = FakeModel::new(vec![("Is it spam?", 0.9)]);
    let verdict = guard(model)
        .with_rejection(RejectionMode::Generated { max_tokens: 40 })
        .check("win a prize now")
        .expect("check");
    assert_eq!(verdict.rejection_message, "Sorry spam.");
    let mut model = FakeModel::new(vec![("Is it spam?", 0.9)]);
    model.generated = Some("  I can't help with that.  ");
    let verdict = guard(model)
        .with_rejection(RejectionMode::Generated { max_tokens: 40 })
        .check("win a prize now")
        .expect("check");
    assert_eq!(verdict.rejection_message, "I can't help with that.");
}

#[test]
fn validate_shape_matches_the_original_service() {
    let model = FakeModel::new(vec![("Is it toxic?", 0.9)]);
    let verdict = guard(model).check("HAIIII BODOH").expect("check");
    let json = serde_json::to_value(ValidateResponse::new("user-123", "HAIIII BODOH", &verdict))
        .expect("json");
    assert_eq!(json["user_id"], "user-123");
    assert_eq!(json["case"], "toxic");
    assert_eq!(json["status_guard"], "failed");
    let steps: Vec<&str> = json["execution_per_step"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| s["step"].as_str().expect("step"))
        .collect();
    assert_eq!(steps, ["spam", "toxic", "harassment", "financial_advice"]);
    assert_eq!(json["execution_per_step"][1]["status"], "failed");
    assert!(json["scores"]["toxic"].as_f64().is_some_and(|s| s > 0.8));
    let chat = serde_json::to_value(ChatResponse::new(&verdict)).expect("json");
    assert_eq!(chat["can_proceed"], false);
}

#[test]
fn a_folder_with_no_usable_template_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("spam.txt"), "no front matter {{message}}").expect("write");
    let err = Guard::from_dir(Arc::new(FakeModel::new(vec![])), dir.path())
        .unwrap_err()
        .to_string();
    assert!(err.contains("no usable validator templates"), "{err}");
}
