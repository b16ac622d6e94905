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
