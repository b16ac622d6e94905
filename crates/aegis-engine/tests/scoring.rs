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
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
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

/// Validator-shaped prompts: a static opening, the message, then (`policy_first == false`) the
/// policy and question, or (`true`) the policy before the message.
pub(crate) fn validator_prompts(message: &str, policy_first: bool) -> Vec<Vec<Segment>> {
    let policies = [
        "No spam: no promotions, prize scams, phishing or chain messages.",
        "No toxicity: no insults, slurs, profanity or demeaning language.",
        "No harassment: no threats, intimidation or targeted abuse of a person.",
        "No financial advice: no recommendations to buy or sell specific investments.",
    ];
    let opening = "<start_of_turn>user\nYou are a policy expert deciding whether a chat message violates a safety policy.\n\n";
    let question = "Does the message violate the policy? Answer Yes or No.<end_of_turn>\n<start_of_turn>model\n";
    policies
        .iter()
        .map(|policy| {
            if policy_first {
                vec![
                    Segment::Template(format!("{opening}Policy: {policy}\n\n<message>\n")),
                    Segment::User(message.into()),
                    Segment::Template(format!("\n</message>\n\n{question}")),
                ]
            } else {
                vec![
                    Segment::Template(format!("{opening}<message>\n")),
                    Segment::User(message.into()),
                    Segment::Template(format!("\n</message>\n\nPolicy: {policy}\n\n{question}")),
                ]
            }
        })
        .collect()
}

/// Messages from a few tokens to past the sliding window (512) and the pack chunk (512 rows).
pub(crate) fn messages_of_many_lengths() -> Vec<String> {
    let sentence = "Halo kak, saya mau tanya soal pesanan saya kemarin yang belum sampai juga ya. ";
    vec![
        "hi".into(),
        "Selamat! Anda menang hadiah 10 juta, klik link ini".into(),
        "dasar goblok kamu, awas ya kalau ketemu".into(),
        "Beli saham BBCA sekarang, pasti cuan!".into(),
        sentence.repeat(6),
        sentence.repeat(40),
        "Buy now, limited offer: ".repeat(60),
    ]
}

/// Issue 6, item 6: the fast path (prefix cache, token trie, one packed batch over many messages)
/// changes speed, never answers.
#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn the_fast_path_equals_one_prompt_at_a_time() {
    let messages = messages_of_many_lengths();
    for policy_first in [false, true] {
        engine().clear_prefix_cache();
        let batch: Vec<Vec<Vec<Segment>>> = messages
            .iter()
            .map(|m| validator_prompts(m, policy_first))
            .collect();
        // Cold cache, then warm; all messages in one batch, then one at a time.
        let cold = engine().score_batch(&batch);
        let warm = engine().score_batch(&batch);
        let stats = engine()
            .prefix_cache_stats()
            .expect("the engine has a prefix cache");
        assert!(stats.hits > 0, "{stats:?}");
        for (i, prompts) in batch.iter().enumerate() {
            let reference = engine().score_separately(prompts).expect("separately");
            let alone = engine().score(prompts).expect("alone");
            for fast in [&cold[i], &warm[i]] {
                let fast = fast.as_ref().expect("batched");
                for (validator, (want, got)) in
                    reference.answers.iter().zip(&fast.answers).enumerate()
                {
                    assert!(
                        (want.p_yes - got.p_yes).abs() < 1e-3,
                        "message {i} validator {validator} policy_first {policy_first}: {} vs {}",
                        want.p_yes,
                        got.p_yes
                    );
                }
            }
            for (want, got) in reference.answers.iter().zip(&alone.answers) {
                assert!((want.p_yes - got.p_yes).abs() < 1e-3);
            }
        }
    }
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn one_bad_message_does_not_fail_its_batch() {
    let long = "kata ".repeat(5000);
    let batch = vec![
        validator_prompts("halo", false),
        validator_prompts(&long, false),
        validator_prompts("promo gratis", false),
    ];
    let results = engine().score_batch(&batch);
    assert!(results[0].is_ok() && results[2].is_ok());
    let err = results[1].as_ref().unwrap_err().to_string();
    assert!(err.contains("over the model's context"), "{err}");
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Largest difference relative to the reference vector's own largest magnitude.
fn relative_diff(reference: &[f32], got: &[f32]) -> f32 {
    let scale = reference
        .iter()
        .fold(0f32, |m, v| m.max(v.abs()))
        .max(1e-12);
    max_abs_diff(reference, got) / scale
}

/// Learned heads read these: the packed encoding of many messages at once, stopped after the
/// deepest layer asked for, equals each message run alone through every layer.
///
/// Bound: 1e-4 of the vector's own largest magnitude. Both paths run the same f32 operations on
/// the same rows; only the matrix products' shapes (and so their summation order) differ. f32
/// keeps about 7 digits, and a reordered sum of n terms moves by at most about n·2^-24 of its
/// magnitude: over 18 layers of 640- to 2048-term sums that stays well under 1e-4. A real
/// difference in what a row attends to (a wrong mask, a leaked neighbour) moves means by far more.
#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn packed_encoding_equals_each_message_alone_at_every_layer() {
    let layers = engine().info().layers;
    let taps: Vec<usize> = vec![1, layers / 2, layers - 1, layers];
    let encode = |m: &str| {
        vec![
            Segment::Template(
                "<start_of_turn>user\nA message sent to a chat assistant:\n\n".into(),
            ),
            Segment::User(m.into()),
        ]
    };
    let messages = messages_of_many_lengths();
    let prompts: Vec<Vec<Segment>> = messages.iter().map(|m| encode(m)).collect();
    let packed = engine().encode_batch(&prompts, &taps);
    for (i, (prompt, packed)) in prompts.iter().zip(&packed).enumerate() {
        let packed = packed.as_ref().expect("packed");
        let alone = engine()
            .encode_separately(prompt, &taps)
            .expect("separately");
        for (at, layer) in taps.iter().enumerate() {
            let reference = &alone.means[at];
            assert_eq!(reference.len(), engine().model().config().hidden_size);
            let diff = relative_diff(reference, &packed.means[at]);
            assert!(diff < 1e-4, "message {i} layer {layer}: relative {diff}");
        }
    }
    // Different messages read differently, and a layer past the model is a clear error.
    let a = packed[1].as_ref().expect("a");
    let b = packed[2].as_ref().expect("b");
    assert!(relative_diff(&a.means[1], &b.means[1]) > 1e-2);
    let err = engine()
        .encode_batch(&prompts[..1], &[layers + 1])
        .remove(0);
    assert!(
        err.as_ref()
            .is_err_and(|e| e.to_string().contains("no layer")),
        "{err:?}"
    );
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn generation_streams_and_stops() {
    let prompt = vec![Segment::Template(
        "<start_of_turn>user\nSay hello in one word.<end_of_turn>\n<start_of_turn>model\n".into(),
    )];
    let mut streamed = String::new();
    let text = engine()
        .generate(&prompt, 12, &mut |piece| {
            streamed.push_str(piece);
            std::ops::ControlFlow::Continue(())
        })
        .expect("generate");
    assert!(!text.is_empty());
    assert_eq!(streamed, text, "streamed pieces add up to the result");
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn generation_stops_while_still_reading_a_long_prompt_when_its_caller_has_gone() {
    let story = "The harbour was quiet and the boats rocked gently. ".repeat(40);
    let prompt = vec![
        Segment::Template("<start_of_turn>user\n".into()),
        Segment::User(story),
        Segment::Template("<end_of_turn>\n<start_of_turn>model\n".into()),
    ];
    let mut asked = 0;
    let text = engine()
        .generate(&prompt, 40, &mut |piece| {
            asked += 1;
            assert_eq!(piece, "", "no text before the prompt is read");
            std::ops::ControlFlow::Break(())
        })
        .expect("generate");
    assert_eq!(text, "");
    assert_eq!(asked, 1, "asked after the first chunk, and stopped there");
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
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
