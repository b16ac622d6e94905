//! A labelled message as training sees it: its features and what groups it.

/// One labelled message's features.
#[derive(Debug, Clone, PartialEq)]
pub struct Example {
    pub features: Vec<f32>,
    pub label: bool,
    /// Reported separately in the metrics (`id`, `en`).
    pub language: String,
    /// The language the guard detects in the message (`id`, `en`): with
    /// [`TrainOptions::by_language`](crate::TrainOptions::by_language) it picks the correction the row teaches, as it picks the
    /// map that scores the message at run time (a row's stated language can differ).
    pub detected_language: String,
    /// Where the row came from (its source, or for authored rows their kind): validation by
    /// source keeps a group's rows on one side of every split.
    pub group: String,
    /// A row a prompt author labelled for this validator, as opposed to a row of the shipped
    /// data: in the larger class it weighs as much as a row of the smaller one (see
    /// `row_weights`).
    pub taught: bool,
}
