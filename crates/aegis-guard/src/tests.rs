//! Guard logic around a fake model: verdict aggregation, case strings, rejections, errors.
//! The real model is exercised by the CLI's integration tests.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use aegis_engine::testing::{FakeEncoder, FakeModel};
use aegis_engine::{ChatFormat, EncoderReading};
use aegis_heads::{CvMetrics, Encoder, Features, Head, ModelBinding, TrainingRecord, HEAD_FORMAT};

use crate::heads::{encoder_context_hash, encoding_context_hash, encoding_preamble};
use crate::*;

pub(crate) fn validator(key: &str, order: i64) -> Validator {
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

fn head(key: &str, layers: Vec<usize>, weights: Vec<f32>, bias: f32) -> Head {
    Head {
        format: HEAD_FORMAT,
        pooling: None,
        validator: key.into(),
        features: Features {
            encoder: Encoder::Decoder,
            layers,
            context_hash: encoding_context_hash(ChatFormat::Gemma),
        },
        model: ModelBinding {
            id: "fake".into(),
            content_hash: "0".repeat(64),
            fingerprint: None,
        },
        training: TrainingRecord {
            data_sha256: String::new(),
            rows: 0,
            positives: 0,
            alpha: 1.0,
            folds: 5,
            cv: CvMetrics {
                rows: 0,
                positives: 0,
                roc_auc: None,
                precision: 0.0,
                recall: 0.0,
                f1: 0.0,
            },
            cv_by_language: Default::default(),
            validation: Default::default(),
            random_folds_cv: None,
            threshold: None,
            out_of_fold: None,
            hidden: None,
            by_language: false,
            features_arithmetic: None,
        },
        weights,
        hidden: None,
        bias,
        languages: Vec::new(),
        language_rule: Default::default(),
        readings: Vec::new(),
        content_hash: String::new(),
    }
}

#[test]
fn a_head_decides_its_validator_from_the_shared_encoding_and_its_prompt_is_skipped() {
    let g = guard(FakeModel::new(vec![]));
    // Long messages are "spam" to this head: p = sigmoid(words - 3).
    let g = g
        .with_head(head("spam", vec![1], vec![1.0, -3.0], 0.0))
        .expect("binding matches");
    let long = g.check("one two three four five six seven").expect("check");
    let spam = &long.results[0];
    assert_eq!(spam.decided_by, ScoreSource::Head);
    assert_eq!(
        spam.prompt_score, None,
        "the head decides; its prompt did not run"
    );
    let learned = spam.learned_score.expect("learned");
    assert!((learned - 0.982).abs() < 1e-3, "{learned}");
    assert_eq!(spam.score, learned);
    assert_eq!(long.case, "spam");
    assert!(long.results[1..]
        .iter()
        .all(|r| r.decided_by == ScoreSource::Prompt
            && r.learned_score.is_none()
            && Some(r.score) == r.prompt_score));
    let short = g.check("hi").expect("check");
    assert!(short.results[0].score > 0.0 && short.results[0].score < 0.5);
    assert_eq!(short.status, Status::Passed);
}

#[test]
fn head_decided_validators_share_one_encoding_and_prompts_run_only_where_asked() {
    let model = Arc::new(FakeModel::new(vec![("Is it toxic?", 0.8)]));
    let mut g = Guard::new(
        model.clone(),
        vec![
            validator("spam", 1),
            validator("toxic", 2),
            validator("harassment", 3),
            validator("financial_advice", 4),
        ],
    );
    for key in ["spam", "toxic", "harassment", "financial_advice"] {
        // Reads layer 2 then layer 1: bytes - words.
        g = g
            .with_head(head(key, vec![2, 1], vec![1.0, 0.0, -1.0, 0.0], -3.0))
            .expect("binding");
    }
    let verdict = g.check("ab cd").expect("check");
    assert_eq!(model.encodings_run.load(Ordering::Relaxed), 1);
    assert_eq!(model.prompts_run.load(Ordering::Relaxed), 0);
    // sigmoid(5 - 2 - 3) = 0.5 for every validator: one encoding, four heads.
    assert!(verdict
        .results
        .iter()
        .all(|r| (r.score - 0.5).abs() < 1e-6 && r.prompt_score.is_none()));

    let both = g.with_prompt_scores(true).check("ab cd").expect("check");
    assert_eq!(model.prompts_run.load(Ordering::Relaxed), 4);
    let toxic = &both.results[1];
    assert_eq!(toxic.decided_by, ScoreSource::Head);
    assert_eq!(toxic.prompt_score, Some(0.8));
    assert!((toxic.score - 0.5).abs() < 1e-6, "the head still decides");
}

#[test]
fn editing_a_policy_keeps_its_head() {
    let g = guard(FakeModel::new(vec![]))
        .with_head(head("toxic", vec![1], vec![0.0, 4.0], 0.0))
        .expect("binding");
    let edited = Validator::parse(
        Path::new("toxic.txt"),
        "---\nname: toxic\norder: 2\nrejection:\n  id: Maaf.\n  en: Sorry.\n---\nA whole new policy about {{message}}\n",
    )
    .expect("valid template");
    let tried = g.with_validator(edited);
    assert!(tried.heads()[1].is_some());
    let verdict = tried.check("hello").expect("check");
    assert_eq!(verdict.results[1].decided_by, ScoreSource::Head);
}

#[test]
fn heads_for_another_model_or_preamble_are_refused_with_the_reason() {
    let mut other_model = head("spam", vec![1], vec![1.0, 0.0], 0.0);
    other_model.model = ModelBinding {
        id: "gemma-3-4b-it".into(),
        content_hash: "f".repeat(64),
        fingerprint: None,
    };
    let err = guard(FakeModel::new(vec![]))
        .with_head(other_model.clone())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("head not used, the prompt's score decides"),
        "{err}"
    );
    assert!(
        err.contains("trained for model gemma-3-4b-it (sha256 ffffffffffff)"),
        "{err}"
    );

    let mut stale = head("toxic", vec![1], vec![1.0, 0.0], 0.0);
    stale.features.context_hash = "0".repeat(64);
    let err = guard(FakeModel::new(vec![]))
        .with_head(stale)
        .unwrap_err()
        .to_string();
    assert!(err.contains("another encoding preamble"), "{err}");

    let too_deep = head("toxic", vec![9], vec![1.0, 0.0], 0.0);
    let err = guard(FakeModel::new(vec![]))
        .with_head(too_deep)
        .unwrap_err()
        .to_string();
    assert!(err.contains("reads layer 9"), "{err}");

    // From a folder: the warning comes back beside the guard, and the prompt decides.
    let dir = tempfile::tempdir().expect("tempdir");
    let templates = dir.path();
    write_template(templates, "spam", 1);
    write_template(templates, "toxic", 2);
    other_model
        .save(&head_path(templates, "spam", false))
        .expect("save");
    std::fs::write(head_path(templates, "toxic", false), "{ broken").expect("write");
    let (loaded, warnings) =
        Guard::from_dir(Arc::new(FakeModel::new(vec![])), templates).expect("guard");
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings[0].to_string().contains("spam.json: head not used"));
    assert!(warnings[1]
        .to_string()
        .contains("toxic.json is not a valid head file"));
    assert!(loaded.heads().iter().all(Option::is_none));
    let verdict = loaded.check("one two three four five").expect("check");
    assert!(verdict
        .results
        .iter()
        .all(|r| r.decided_by == ScoreSource::Prompt));
}

fn write_template(dir: &Path, key: &str, order: i64) {
    let text = format!(
        "---\nname: {key}\norder: {order}\nrejection:\n  id: Maaf {key}.\n  en: Sorry {key}.\n---\nMessage: {{{{message}}}}\nIs it {key}?\n"
    );
    std::fs::write(dir.join(format!("{key}.txt")), text).expect("write template");
}

#[test]
fn a_matching_head_in_the_folder_is_used() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_template(dir.path(), "spam", 1);
    write_template(dir.path(), "toxic", 2);
    head("toxic", vec![1], vec![0.0, 4.0], 0.0)
        .save(&head_path(dir.path(), "toxic", false))
        .expect("save");
    let (with_head, warnings) =
        Guard::from_dir(Arc::new(FakeModel::new(vec![])), dir.path()).expect("guard");
    assert!(warnings.is_empty(), "{warnings:?}");
    let verdict = with_head.check("hello").expect("check");
    assert_eq!(verdict.results[1].decided_by, ScoreSource::Head);
    assert_eq!(verdict.case, "toxic");
}

/// A head on EmbeddingGemma-style embeddings, bound to the fake encoder.
pub(crate) fn encoder_head(key: &str, weights: Vec<f32>, bias: f32) -> Head {
    let encoder = FakeEncoder::new();
    let mut head = head(key, vec![], weights, bias);
    head.features.encoder = Encoder::EmbeddingGemma;
    head.features.context_hash = encoder_context_hash(&encoder.info);
    head.model = ModelBinding {
        id: encoder.info.id.clone(),
        content_hash: encoder.info.content_hash.clone(),
        fingerprint: None,
    };
    head
}

#[test]
fn a_head_for_one_encoder_is_refused_when_another_is_loaded() {
    // An encoder head without its encoder: refused, and the reason names the way out.
    let err = guard(FakeModel::new(vec![]))
        .with_head(encoder_head("toxic", vec![1.0, 0.0], 0.0))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("no encoder is loaded") && err.contains("--encoder embeddinggemma"),
        "{err}"
    );

    // A decoder head while the heads read an encoder: refused too.
    let encoder: Arc<dyn aegis_engine::SentenceEncoder> = Arc::new(FakeEncoder::new());
    let err = guard(FakeModel::new(vec![]))
        .with_encoder(Some(encoder.clone()))
        .with_head(head("toxic", vec![1], vec![1.0, 0.0], 0.0))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("reads the model's hidden states") && err.contains("fake-encoder"),
        "{err}"
    );

    // Choosing an encoder drops the decoder heads a guard already had.
    let switched = guard(FakeModel::new(vec![]))
        .with_head(head("toxic", vec![1], vec![1.0, 0.0], 0.0))
        .expect("decoder head")
        .with_encoder(Some(encoder.clone()));
    assert!(switched.heads().iter().all(Option::is_none));

    // An encoder head trained on other weights.
    let mut other = encoder_head("toxic", vec![1.0, 0.0], 0.0);
    other.model.content_hash = "f".repeat(64);
    let err = guard(FakeModel::new(vec![]))
        .with_encoder(Some(encoder))
        .with_head(other)
        .unwrap_err()
        .to_string();
    assert!(err.contains("trained for encoder"), "{err}");
}

#[test]
fn an_encoder_head_decides_from_the_embedding_and_the_decoder_is_not_asked() {
    let encoder = Arc::new(FakeEncoder::new());
    let model = Arc::new(FakeModel::new(vec![]));
    let guard = Guard::new(model.clone(), vec![validator("toxic", 1)])
        .with_encoder(Some(encoder.clone()))
        // p = sigmoid(words - 3): fails from four words on.
        .with_head(encoder_head("toxic", vec![1.0, -3.0], 0.0))
        .expect("bound to the fake encoder");
    let short = guard.check("halo kak").expect("verdict");
    let long = guard.check("you are a very bad person").expect("verdict");
    assert_eq!(short.results[0].decided_by, ScoreSource::Head);
    assert!(short.results[0].passed && !long.results[0].passed);
    assert_eq!(encoder.embedded.load(Ordering::Relaxed), 2);
    assert_eq!(model.encodings_run.load(Ordering::Relaxed), 0);
    assert_eq!(model.prompts_run.load(Ordering::Relaxed), 0);
    // The model's context limit holds though the model never runs.
    let err = guard.check(&"kata ".repeat(100)).unwrap_err().to_string();
    assert!(err.contains("it is 100 tokens"), "{err}");
    assert!(
        err.contains("over the model's context of 64 tokens"),
        "{err}"
    );
    assert_eq!(encoder.embedded.load(Ordering::Relaxed), 2, "refused first");
}

/// A head with a map for Indonesian scores a message the guard reads as Indonesian by that map,
/// and an English one by its own, whatever language the rejection is configured to answer in.
#[test]
fn a_message_is_scored_by_the_map_of_the_language_it_reads_as() {
    let encoder = Arc::new(FakeEncoder::new());
    // Own map: fails from ten words on; Indonesian map: from one.
    let mut head = encoder_head("toxic", vec![1.0, -10.0], 0.0);
    head.languages.push(aegis_heads::LanguageMap {
        language: "id".into(),
        weights: vec![1.0, -1.0],
        bias: 0.0,
        hidden: None,
    });
    let guard = Guard::new(
        Arc::new(FakeModel::new(vec![])),
        vec![validator("toxic", 1)],
    )
    .with_encoder(Some(encoder))
    .with_head(head)
    .expect("bound to the fake encoder");
    let indonesian = "kamu bodoh sekali dan tidak berguna";
    let english = "what a lovely day it is today";
    assert!(!guard.check(indonesian).expect("verdict").results[0].passed);
    assert!(guard.check(english).expect("verdict").results[0].passed);
    let answering_in_indonesian = guard.with_language(Some(Language::Indonesian));
    assert!(
        answering_in_indonesian
            .check(english)
            .expect("verdict")
            .results[0]
            .passed,
        "the reply's language does not pick the map"
    );
}

#[test]
fn encoder_heads_on_an_intermediate_layer_stop_the_reading_there() {
    let encoder = Arc::new(FakeEncoder::new());
    let mut on_layer = encoder_head("toxic", vec![1.0, -6.0], 0.0);
    on_layer.features.layers = vec![2];
    let guard = Guard::new(
        Arc::new(FakeModel::new(vec![])),
        vec![validator("spam", 1), validator("toxic", 2)],
    )
    .with_encoder(Some(encoder.clone()))
    // The fake's layer-2 mean is [2 * words, 1]: p = sigmoid(2 * words - 6) fails from 4 words.
    .with_head(on_layer.clone())
    .expect("bound to the fake encoder");
    let reading = guard.encoder_reading();
    assert_eq!(reading.layers, vec![2]);
    assert!(!reading.embedding, "no head reads the embedding");
    let verdict = guard.check("you are a bad person").expect("verdict");
    assert!(!verdict.results[1].passed);
    assert_eq!(verdict.results[1].decided_by, ScoreSource::Head);
    assert!(guard.check("halo kak").expect("verdict").results[1].passed);
    let last = encoder.last_reading.lock().expect("lock").clone();
    assert_eq!(last, Some(reading));

    // With a head on the embedding beside it, both are read in one pass.
    let both = guard
        .with_head(encoder_head("spam", vec![1.0, -3.0], 0.0))
        .expect("bound");
    assert_eq!(
        both.encoder_reading(),
        EncoderReading {
            layers: vec![2],
            embedding: true,
            token_states: false,
        }
    );
    let verdict = both.check("halo kak").expect("verdict");
    assert!(verdict.results.iter().all(|r| r.passed), "{verdict:?}");

    // A layer the encoder does not have is refused.
    on_layer.features.layers = vec![3];
    let err = Guard::new(
        Arc::new(FakeModel::new(vec![])),
        vec![validator("toxic", 1)],
    )
    .with_encoder(Some(encoder))
    .with_head(on_layer)
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("reads layer 3, but the encoder has 2 layers"),
        "{err}"
    );
}

#[test]
fn a_decoder_head_decides_at_its_own_threshold_and_a_reload_keeps_the_guards_choices() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_template(dir.path(), "spam", 1);
    write_template(dir.path(), "toxic", 2);
    let mut tuned = head("toxic", vec![1], vec![0.0, 4.0], 0.0);
    tuned.training.threshold = Some(0.3);
    tuned
        .save(&head_path(dir.path(), "toxic", false))
        .expect("save");
    assert!(dir.path().join("heads/decoder/toxic.json").is_file());
    let (guard, warnings) =
        Guard::from_dir(Arc::new(FakeModel::new(vec![])), dir.path()).expect("guard");
    assert!(warnings.is_empty(), "{warnings:?}");
    let thresholds: Vec<f32> = guard.validators().iter().map(|v| v.threshold).collect();
    assert_eq!(thresholds[1], 0.3, "the head's own threshold");
    assert_ne!(
        thresholds[0], 0.3,
        "a prompt-decided validator keeps the template's"
    );

    let guard = guard.with_language(Some(Language::English));
    let (reloaded, _) = guard.reload(dir.path()).expect("reload");
    assert!(reloaded.heads()[1].is_some());
    let verdict = reloaded.check("kamu jahat sekali").expect("check");
    assert_eq!(verdict.case, "toxic");
    assert_eq!(
        verdict.rejection_message, "Sorry toxic.",
        "the language is kept"
    );
}

#[test]
fn the_encoding_preamble_in_gemmas_markup_is_the_one_the_shipped_heads_were_trained_on() {
    // Decoder heads record the preamble's hash: rendering it through the chat format must not
    // change a byte of it.
    assert_eq!(
        encoding_preamble(ChatFormat::Gemma),
        "<start_of_turn>user\nA message sent to a chat assistant, to be checked against safety policies:\n\n"
    );
    assert_eq!(
        Guard::rejection_prompt(ChatFormat::Gemma, &[&validator("spam", 0)], Language::English),
        vec![aegis_engine::Segment::Template(
            "<start_of_turn>user\nWrite one short, polite sentence in English telling a user that you cannot help with their message because it goes against these policies: spam. Reply with the sentence only.<end_of_turn>\n<start_of_turn>model\n".into()
        )]
    );
}

#[test]
fn the_encoder_fingerprint_is_embedded_once_per_encoder() {
    let encoder = Arc::new(FakeEncoder::new());
    let guard = guard(FakeModel::new(vec![])).with_encoder(Some(encoder.clone()));
    let first = guard
        .encoder_fingerprint()
        .expect("an encoder")
        .expect("embedded");
    let probes = encoder.embedded.load(Ordering::Relaxed);
    assert!(probes > 0);
    // Training each of four heads records it; a template reload keeps the encoder.
    for _ in 0..3 {
        assert_eq!(
            guard.encoder_fingerprint().expect("an encoder").ok(),
            Some(first.clone())
        );
    }
    let (reloaded, _) = guard
        .reload(Path::new("../../prompt_guard"))
        .expect("reload");
    assert!(reloaded.encoder_fingerprint().is_some());
    assert_eq!(encoder.embedded.load(Ordering::Relaxed), probes);
    // Another encoder is fingerprinted anew; none, not at all.
    let other = guard.with_encoder(Some(Arc::new(FakeEncoder::new())));
    assert!(other.encoder_fingerprint().is_some());
    assert!(other.with_encoder(None).encoder_fingerprint().is_none());
    assert_eq!(encoder.embedded.load(Ordering::Relaxed), probes);
}
