//! Scores are real model probabilities.

use aegis_engine::{LanguageModel, Segment};

use crate::common::engine;

fn prompt(question: &str, message: &str) -> Vec<Segment> {
    vec![
        Segment::Template("<start_of_turn>user\nYou are a policy expert.\n\n<message>\n".into()),
        Segment::User(message.into()),
        Segment::Template(format!(
            "\n</message>\n\n{question} Answer Yes or No.<end_of_turn>\n<start_of_turn>model\n"
        )),
    ]
}

#[test]
fn scores_are_probabilities_that_vary_and_repeat() {
    let prompts = vec![
        prompt(
            "Is this message spam?",
            "Selamat! Anda menang hadiah 10 juta, klik link ini",
        ),
        prompt(
            "Is this message toxic?",
            "Selamat! Anda menang hadiah 10 juta, klik link ini",
        ),
        prompt("Is this message spam?", "Bagaimana cara top up saldo?"),
        prompt("Is this message toxic?", "dasar goblok kamu"),
    ];
    let p_yes = |prompts: &[Vec<Segment>]| -> Vec<f32> {
        engine()
            .score(prompts)
            .expect("score")
            .answers
            .iter()
            .map(|s| s.p_yes)
            .collect()
    };
    let first = p_yes(&prompts);
    let again = p_yes(&prompts);
    assert_eq!(first, again, "scoring is deterministic");
    for p in &first {
        assert!(
            *p > 0.0 && *p < 1.0,
            "not a probability strictly inside (0, 1): {p}"
        );
    }
    let mut distinct = first.clone();
    distinct.sort_by(f32::total_cmp);
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        first.len(),
        "scores differ across prompts: {first:?}"
    );
}

#[test]
fn shared_prefix_scoring_equals_one_prompt_at_a_time() {
    let prompts = vec![
        prompt(
            "Is this message spam?",
            "Beli saham BBCA sekarang, pasti cuan!",
        ),
        prompt(
            "Is this message financial advice?",
            "Beli saham BBCA sekarang, pasti cuan!",
        ),
    ];
    let together = engine().score(&prompts).expect("together");
    for (p, joint) in prompts.iter().zip(&together.answers) {
        let alone = engine().score(std::slice::from_ref(p)).expect("alone");
        let alone_answer = &alone.answers[0];
        assert!(
            (alone_answer.p_yes - joint.p_yes).abs() < 1e-3,
            "{} vs {}",
            alone_answer.p_yes,
            joint.p_yes
        );
        assert!(max_abs_diff(&alone_answer.answer_hidden, &joint.answer_hidden) < 1e-3);
        // The message's own tokens see only what precedes them, not the policy question.
        assert!(max_abs_diff(&alone.message_mean, &together.message_mean) < 1e-3);
    }
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn features_have_the_model_width_and_tell_messages_apart() {
    let hidden = engine().model().config().hidden_size;
    let score = |message: &str| {
        engine()
            .score(&[prompt("Is this message spam?", message)])
            .expect("score")
    };
    let (a, b) = (
        score("Selamat pagi, apa kabar?"),
        score("dasar goblok kamu"),
    );
    assert_eq!(a.message_mean.len(), hidden);
    assert_eq!(a.answers[0].answer_hidden.len(), hidden);
    assert!(a.message_mean.iter().all(|v| v.is_finite()));
    assert!(max_abs_diff(&a.message_mean, &b.message_mean) > 1e-2);
    let no_user_text = engine()
        .score(&[vec![Segment::Template("<start_of_turn>user\nHi".into())]])
        .expect("score");
    assert!(no_user_text.message_mean.is_empty());
}

#[test]
fn generation_streams_and_stops() {
    let prompt = vec![Segment::Template(
        "<start_of_turn>user\nSay hello in one word.<end_of_turn>\n<start_of_turn>model\n".into(),
    )];
    let mut streamed = String::new();
    let text = engine()
        .generate(&prompt, 12, &mut |piece| streamed.push_str(piece))
        .expect("generate");
    assert!(!text.is_empty());
    assert_eq!(streamed, text, "streamed pieces add up to the result");
}

#[test]
fn over_long_prompts_are_refused_with_both_lengths() {
    let long = "kata ".repeat(5000);
    let err = engine()
        .score(&[prompt("Is this spam?", &long)])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("over the model's context of 4096 tokens"),
        "{err}"
    );
}
