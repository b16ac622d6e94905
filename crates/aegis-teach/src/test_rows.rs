//! Labelled rows for the unit tests of the threshold rules.

use aegis_guard::LabelledMessage;

/// A row labelled for the validator `promo`; `taught` ones carry an example's id, as the
/// author's examples do.
pub(crate) fn row(text: &str, violates: bool, taught: bool) -> LabelledMessage {
    LabelledMessage {
        id: taught.then(|| format!("example:{text}")),
        text: text.into(),
        lang: Some("en".into()),
        labels: [("promo".to_string(), Some(violates))]
            .into_iter()
            .collect(),
        source: None,
        kind: None,
    }
}

/// A taught row of `promo` that labels a message the labelling queue suggested.
pub(crate) fn suggested_row(text: &str, violates: bool) -> LabelledMessage {
    LabelledMessage {
        kind: Some("suggestion".into()),
        ..row(text, violates, true)
    }
}
