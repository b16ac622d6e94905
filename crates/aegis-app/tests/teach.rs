//! The Teach view's work on the real model: a validator created from examples, trained on the
//! labelled files beside the heads, applied, taught by a mark, and reverted bit for bit.

use aegis_app::console::ConsoleEvent;
use aegis_app::error::ErrorKind;
use aegis_app::teach::NewValidator;
use aegis_guard::ScoreSource;
use aegis_store::ExampleOrigin;

use crate::console::{repo, start};

const KEY: &str = "personal_data_request";

fn positives() -> Vec<String> {
    std::fs::read_to_string(repo().join("docs/examples/personal-data-requests.jsonl"))
        .expect("read the positives")
        .lines()
        .map(|l| {
            let row: serde_json::Value = serde_json::from_str(l).expect("JSON");
            row["text"].as_str().expect("text").to_string()
        })
        .collect()
}

fn new_validator(positives: Vec<String>) -> NewValidator {
    NewValidator {
        key: KEY.into(),
        name: "Personal data request".into(),
        policy: "The message must not ask the reader for OTP codes, PINs, passwords, card numbers or ID documents.".into(),
        rejection_id: "Maaf, pesan ini meminta data pribadi.".into(),
        rejection_en: "Sorry, this message asks for personal data.".into(),
        positives,
        near_misses: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
async fn a_validator_taught_from_examples_decides_by_its_head_learns_a_mark_and_reverts() {
    let fixture = start().await;
    let console = &fixture.console;
    // The small authored sample the e2e test trains on stands in for the shipped data.
    let heads = fixture.prompts.join("heads");
    for entry in std::fs::read_dir(&heads).expect("heads").flatten() {
        if entry.path().extension().is_some_and(|x| x == "jsonl") {
            std::fs::remove_file(entry.path()).expect("remove");
        }
    }
    for name in ["teach-data.jsonl", "teach-benign-holdout.jsonl"] {
        std::fs::copy(repo().join("ui/e2e/fixtures").join(name), heads.join(name)).expect("copy");
    }

    // Too few examples, an existing key, a missing field: refused, nothing written.
    let few = console
        .create_validator(new_validator(positives()[..5].to_vec()))
        .await
        .expect_err("five examples are too few");
    assert_eq!(few.kind(), ErrorKind::Invalid);
    assert!(few.to_string().contains("at least 20"), "{few}");
    let taken = NewValidator {
        key: "toxic".into(),
        ..new_validator(positives())
    };
    assert_eq!(
        console
            .create_validator(taken)
            .await
            .expect_err("exists")
            .kind(),
        ErrorKind::Invalid
    );
    assert!(!fixture.prompts.join(format!("{KEY}.txt")).exists());

    console
        .create_validator(new_validator(positives()))
        .await
        .expect("created");
    let listed = console.teach_validators().await.expect("validators");
    let created = listed.iter().find(|v| v.key == KEY).expect("listed");
    assert_eq!(
        (created.scored_by.as_str(), created.should_fail),
        ("prompt", 26)
    );

    let first = console
        .train("t1".into(), KEY.into())
        .await
        .expect("trained");
    let figures = &first.figures;
    assert_eq!(figures.taught, 26);
    assert!(figures.roc_auc.is_some_and(|a| a > 0.8), "{figures:?}");
    assert!(
        figures.threshold.is_some(),
        "the benign rows set a threshold"
    );
    // This sample's benign rows talk about codes and ID cards too: no warning.
    assert_eq!(figures.topic_warning, None, "{figures:?}");
    let events = fixture.events.0.lock().expect("events").clone();
    assert!(
        events.iter().any(|e| matches!(e, ConsoleEvent::Train { train_id, stage, .. } if train_id == "t1" && stage == "reading messages")),
        "progress was reported"
    );
    let v1 = console.apply_head(KEY).await.expect("applied");
    assert!(
        console.apply_head(KEY).await.is_err(),
        "applied once: nothing pending"
    );

    let request = console
        .check(
            "Hey, read me the code we just sent to your number so we can finish the upgrade."
                .into(),
        )
        .await
        .expect("check");
    let decided = request
        .verdict
        .results
        .iter()
        .find(|r| r.key == KEY)
        .expect("the new validator ran");
    assert_eq!(decided.decided_by, ScoreSource::Head);
    assert!(!decided.passed, "{decided:?}");
    // The verdict names the head version that decided it, as it names the template.
    let recorded = console.verdict(request.verdict_id).await.expect("recorded");
    let v1_hash = &console.head_versions(KEY).await.expect("versions")[0].content_hash;
    let stored = recorded
        .row
        .results
        .iter()
        .find(|r| r.key == KEY)
        .expect("stored");
    assert_eq!(stored.head_hash.as_ref(), Some(v1_hash));

    // The head's first mistake on a warning never to share a code, marked "should pass".
    let warning = "Never share your OTP with anyone, including our staff.";
    let before = console.check(warning.into()).await.expect("check");
    let score = |verdict: &aegis_app::console::CheckResult| {
        verdict
            .verdict
            .results
            .iter()
            .find(|r| r.key == KEY)
            .map(|r| (r.score, r.passed))
            .expect("scored")
    };
    let mark = console
        .mark_verdict(before.verdict_id, KEY, false)
        .await
        .expect("marked");
    assert!(
        !mark.proposed,
        "no team: the console's own mark is trained on"
    );
    let examples = console.examples(KEY).await.expect("examples");
    let marked = examples
        .iter()
        .find(|e| e.text == warning)
        .expect("the mark is an example");
    assert_eq!(
        (marked.origin, marked.violates),
        (ExampleOrigin::Mark, false)
    );
    let second = console
        .train("t2".into(), KEY.into())
        .await
        .expect("retrained");
    assert_eq!(second.figures.taught, 27);
    assert!(
        second.figures.encoded <= 1,
        "only the marked text is new to the feature cache: {:?}",
        second.figures
    );
    console.apply_head(KEY).await.expect("applied again");
    let after = console.check(warning.into()).await.expect("check");
    assert!(
        score(&after).0 < score(&before).0,
        "the mark lowers its score: {:?} -> {:?}",
        score(&before),
        score(&after)
    );
    assert!(score(&after).1, "it passes now: {:?}", score(&after));

    let versions = console.head_versions(KEY).await.expect("versions");
    assert_eq!(versions.len(), 2);
    let head_file = fixture.prompts.join("heads").join(format!("{KEY}.json"));
    let reverted = console.revert_head(v1.version).await.expect("reverted");
    assert!(reverted.version > v1.version);
    let stored = versions.iter().find(|v| v.id == v1.version).expect("v1");
    assert_eq!(
        aegis_store::content_hash(&std::fs::read(&head_file).expect("head")),
        stored.content_hash,
        "bit for bit"
    );
    let again = console.check(warning.into()).await.expect("check");
    assert_eq!(
        score(&again),
        score(&before),
        "the first head's verdict again"
    );
}
