//! Cross-fitting against the real encoder: the adapter that holds a fold out never learns from
//! that fold's labels (nor do the steering heads trained beside it), and rows only scored are read
//! by every fold's adapter.

use aegis_adapt::{cross_fit, AdapterShape, CrossFit, TrainingOptions, TrainingText};
use aegis_engine::{default_encoder_dir, Projection};

const ROWS: [(&str, bool, &str); 8] = [
    ("You are an idiot and everyone knows it.", true, "a"),
    ("Thanks, the package arrived this morning.", false, "a"),
    ("Dasar bego, kerja gitu aja nggak becus", true, "b"),
    ("Besok rapat jam sembilan ya.", false, "b"),
    ("Shut up, you worthless clown.", true, "c"),
    ("Could you send me the slides from today?", false, "c"),
    ("Anjing lo, jangan sok pintar", true, "d"),
    ("Saya sudah transfer tadi pagi.", false, "d"),
];

/// Groups a and b are fold 0, c and d fold 1; the last text is only scored. With
/// `first_label_changed`, fold 0's first row is labelled as benign. (Not every label of the fold:
/// flipping them all leaves the updates' gradients as they were, the steering head's sign aside.)
fn run(first_label_changed: bool) -> CrossFit {
    let mut texts: Vec<TrainingText> = ROWS
        .iter()
        .enumerate()
        .map(|(i, (text, label, group))| TrainingText {
            text: (*text).into(),
            labels: vec![Some(*label && !(first_label_changed && i == 0))],
            group: (*group).into(),
        })
        .collect();
    texts.push(TrainingText {
        text: "Someone keeps calling me an \"idiot\" in meetings. Who should I tell?".into(),
        labels: vec![None],
        group: "scored".into(),
    });
    let fold_of: Vec<Option<usize>> = ROWS
        .iter()
        .map(|(_, _, group)| Some(usize::from(*group > "b")))
        .chain([None])
        .collect();
    let shape = AdapterShape {
        first_layer: 22,
        rank: 2,
        alpha: 16.0,
        projections: Projection::ALL.to_vec(),
    };
    let options = TrainingOptions {
        epochs: 2,
        learning_rate: 1e-3,
        batch_tokens: 64,
        validation_share: 0.0,
        ..TrainingOptions::default()
    };
    cross_fit(
        &default_encoder_dir(),
        &texts,
        &fold_of,
        2,
        1,
        shape,
        &options,
        |_| {},
    )
    .unwrap_or_else(|e| {
        panic!("cross-fitting runs (scripts/setup-encoder.sh sets the encoder up): {e}")
    })
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn a_folds_adapter_never_reads_a_label_of_the_fold_it_holds_out() {
    let (first, changed) = (run(false), run(true));
    assert_eq!(first.by_fold.len(), 2);
    for read in first.by_fold.iter().chain([&first.plain]) {
        assert!(
            read.iter().all(Option::is_some),
            "every text is read, the scored one too"
        );
    }
    // Whole vectors compared, without printing 768 numbers a text when they differ.
    assert!(first.plain == changed.plain);
    assert!(
        first.by_fold[0] == changed.by_fold[0],
        "fold 0's adapter trained on fold 1 alone: a label of fold 0 cannot reach it"
    );
    assert!(
        first.by_fold[1] != changed.by_fold[1],
        "fold 1's adapter trained on fold 0, so the changed label changes what it learned"
    );
    assert!(
        first.by_fold[1] != first.plain,
        "training moved the embedding"
    );
    assert_eq!(first.reports[0].texts, 4);
    // Stacking scores fold 0's rows with the steering heads trained beside fold 0's adapter, so
    // they must be as blind to fold 0's labels as the adapter is.
    assert!(first.reports[0].steering == changed.reports[0].steering);
    assert!(first.reports[1].steering != changed.reports[1].steering);
    let scored = first.by_fold[1][ROWS.len()]
        .as_ref()
        .expect("the scored text is read");
    let p = first.reports[1]
        .steering
        .probability(0, scored)
        .expect("one steering head, the embedding's width");
    assert!((0.0..=1.0).contains(&p));
    assert!(first.reports[1].steering.probability(1, scored).is_err());
}
