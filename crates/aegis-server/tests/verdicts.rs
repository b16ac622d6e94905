//! The shipped guard on the real default model: the verdicts a reviewer must be able to trust.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use aegis_guard::{Guard, ScoreSource, Status};
use aegis_heads::Head;

use crate::common::engine;

fn prompts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../prompt_guard")
}

fn shipped_guard() -> Guard {
    let (guard, warnings) = Guard::from_dir(engine(), &prompts_dir()).expect("shipped templates");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(
        guard.heads().iter().all(Option::is_some),
        "every shipped validator has a head for the default model"
    );
    guard
}

/// Issue 17: ordinary messages to an assistant pass, in both languages.
#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn ordinary_messages_pass() {
    let guard = shipped_guard();
    for text in [
        "hello there, how are you?",
        "halo kak, apa kabar?",
        "thanks a lot, have a nice day",
        "anjing saya sakit, klinik hewan terdekat di mana?",
    ] {
        let verdict = guard.check(text).expect("verdict");
        let scores: Vec<String> = verdict
            .results
            .iter()
            .map(|r| format!("{} {:.3}/{}", r.key, r.score, r.threshold))
            .collect();
        assert_eq!(verdict.status, Status::Passed, "{text:?}: {scores:?}");
        assert!(verdict
            .results
            .iter()
            .all(|r| r.decided_by == ScoreSource::Head && r.prompt_score.is_none()));
    }
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn a_clear_insult_fails_toxic_in_either_language() {
    let guard = shipped_guard();
    for text in [
        "you are a worthless stupid idiot, shut up",
        "dasar goblok, otak udang kamu, bangsat",
    ] {
        let verdict = guard.check(text).expect("verdict");
        let toxic = verdict
            .results
            .iter()
            .find(|r| r.key == "toxic")
            .expect("toxic");
        assert!(!toxic.passed, "{text:?}: toxic {}", toxic.score);
    }
}

/// Heads read one encoding of the message whatever else is in the batch: the scores of messages
/// checked together equal their scores checked alone (the engine's own test bounds the encoding
/// itself; 1e-4 here is that bound carried through a calibrated linear head).
#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn batched_head_scores_equal_each_message_alone() {
    let guard = shipped_guard();
    let texts = [
        "halo kak, pesanan saya belum sampai",
        "Selamat! Anda menang hadiah 10 juta, klik link ini",
        "you are so dumb",
        "Beli saham BBCA sekarang, pasti cuan 50% minggu depan!",
    ];
    let together = guard.check_batch(&texts);
    for (text, batched) in texts.iter().zip(together) {
        let batched = batched.expect("batched");
        let alone = guard.check(text).expect("alone");
        for (b, a) in batched.results.iter().zip(&alone.results) {
            assert!(
                (b.score - a.score).abs() < 1e-4,
                "{text:?} {}: {} batched vs {} alone",
                b.key,
                b.score,
                a.score
            );
        }
    }
}

/// A validator without a head is decided by its prompt and reports the prompt's score, beside
/// head-decided ones that skip their prompts; asking for prompt scores reports both.
#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn a_validator_without_a_head_is_decided_by_its_prompt() {
    let shipped = shipped_guard();
    let mut guard = Guard::new(engine(), shipped.validators().to_vec());
    for key in ["spam", "harassment", "financial_advice"] {
        let head = Head::load(&aegis_guard::head_path(&prompts_dir(), key, false)).expect("head");
        guard = guard.with_head(head).expect("bound");
    }
    let verdict = guard.check("halo kak, apa kabar?").expect("verdict");
    for r in &verdict.results {
        if r.key == "toxic" {
            assert_eq!(r.decided_by, ScoreSource::Prompt);
            let prompt = r.prompt_score.expect("the prompt ran");
            assert!(prompt > 0.0 && prompt < 1.0 && r.score == prompt, "{r:?}");
            assert!(r.learned_score.is_none());
        } else {
            assert_eq!(r.decided_by, ScoreSource::Head);
            assert!(r.prompt_score.is_none(), "{r:?}");
        }
    }
    let both = Arc::new(shipped.with_prompt_scores(true))
        .check("halo kak, apa kabar?")
        .expect("verdict");
    assert!(both
        .results
        .iter()
        .all(|r| r.prompt_score.is_some() && r.learned_score.is_some()));
}
