//! The figures a prompt author can trust about a taught validator: measured on the examples the
//! author labelled, out of fold. The shipped data's figure reads high for a new policy (its
//! negatives never mention the topic, so any head that knows the topic separates them); what the
//! author labelled, near misses above all, is where the policy is drawn.

use std::collections::BTreeMap;

use aegis_guard::LabelledMessage;
use serde::Serialize;

/// Taught examples of each side a figure needs before it says anything.
pub const MIN_TO_MEASURE: usize = 5;

/// ROC AUC in one language, with the rows it was measured on.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct LanguageFigures {
    pub language: String,
    pub rows: usize,
    pub positives: usize,
    pub roc_auc: Option<f64>,
}

/// How the head does on the author's own examples, each scored by a fit that did not see its
/// group (origin and language).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct AuthorFigures {
    pub violating: usize,
    pub passing: usize,
    pub roc_auc: Option<f64>,
    pub by_language: Vec<LanguageFigures>,
    /// Share of the violating examples failing at the threshold.
    pub recall: Option<f64>,
    /// Share of the passing examples (the near misses) failing at the threshold. When the near
    /// misses raised the threshold it was chosen on these scores, so this reads low.
    pub passing_flagged: Option<f64>,
    /// Why there is no figure: too few examples of a side.
    pub too_few: Option<String>,
}

/// The figures of `key`'s taught rows among `messages` (aligned, over the rows labelled for
/// `key`, with `out_of_fold`), at `threshold`.
pub fn author_figures(
    key: &str,
    messages: &[LabelledMessage],
    out_of_fold: &[f64],
    threshold: f64,
) -> AuthorFigures {
    let taught: Vec<(&LabelledMessage, bool, f64)> = messages
        .iter()
        .filter_map(|m| m.label(key).map(|label| (m, label)))
        .zip(out_of_fold)
        .filter(|((m, _), _)| m.is_taught())
        .map(|((m, label), &score)| (m, label, score))
        .collect();
    let violating = taught.iter().filter(|(_, label, _)| *label).count();
    let passing = taught.len() - violating;
    let share_failing = |side: bool, count: usize| {
        (count >= MIN_TO_MEASURE).then(|| {
            let failing = taught
                .iter()
                .filter(|(_, label, score)| *label == side && *score >= threshold)
                .count();
            failing as f64 / count as f64
        })
    };
    let too_few = (violating < MIN_TO_MEASURE || passing < MIN_TO_MEASURE).then(|| {
        format!(
            "{violating} violating and {passing} passing examples of yours: at least \
             {MIN_TO_MEASURE} of each are needed to measure the head on them; label near misses \
             (messages on the topic that pass) to get a figure you can trust"
        )
    });
    let auc = |rows: &[&(&LabelledMessage, bool, f64)]| {
        let scores: Vec<f64> = rows.iter().map(|(_, _, s)| *s).collect();
        let labels: Vec<bool> = rows.iter().map(|(_, l, _)| *l).collect();
        aegis_heads::roc_auc(&scores, &labels)
    };
    let mut languages: BTreeMap<String, Vec<&(&LabelledMessage, bool, f64)>> = BTreeMap::new();
    for row in &taught {
        languages.entry(row.0.language()).or_default().push(row);
    }
    AuthorFigures {
        violating,
        passing,
        roc_auc: too_few
            .is_none()
            .then(|| auc(&taught.iter().collect::<Vec<_>>()))
            .flatten(),
        by_language: languages
            .into_iter()
            .map(|(language, rows)| LanguageFigures {
                positives: rows.iter().filter(|(_, l, _)| *l).count(),
                rows: rows.len(),
                roc_auc: auc(&rows),
                language,
            })
            .collect(),
        recall: share_failing(true, violating),
        passing_flagged: share_failing(false, passing),
        too_few,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(text: &str, violates: bool, taught: bool, lang: &str) -> LabelledMessage {
        LabelledMessage {
            id: taught.then(|| format!("{}{text}", aegis_guard::TAUGHT_ID_PREFIX)),
            text: text.into(),
            lang: Some(lang.into()),
            labels: [("gambling".to_string(), Some(violates))].into(),
            source: None,
            kind: None,
        }
    }

    #[test]
    fn measures_the_authors_rows_only_and_says_when_they_are_too_few() {
        // Shipped rows score perfectly; the author's near misses do not.
        let mut messages = vec![row("shipped benign", false, false, "en")];
        let mut scores = vec![0.0];
        for i in 0..6 {
            messages.push(row(&format!("promo {i}"), true, true, "en"));
            scores.push(0.9);
            messages.push(row(&format!("news {i}"), false, true, "id"));
            scores.push(if i < 3 { 0.95 } else { 0.1 });
        }
        let figures = author_figures("gambling", &messages, &scores, 0.5);
        assert_eq!((figures.violating, figures.passing), (6, 6));
        assert_eq!(figures.recall, Some(1.0));
        assert_eq!(figures.passing_flagged, Some(0.5));
        // Each promotion outscores three news items and is outscored by three.
        assert_eq!(figures.roc_auc, Some(0.5));
        assert!(figures.too_few.is_none());
        let languages: Vec<&str> = figures
            .by_language
            .iter()
            .map(|l| l.language.as_str())
            .collect();
        assert_eq!(languages, ["en", "id"]);

        let few = author_figures("gambling", &messages[..5], &scores[..5], 0.5);
        assert_eq!((few.violating, few.passing), (2, 2));
        assert!(few.roc_auc.is_none() && few.recall.is_none());
        assert!(few
            .too_few
            .expect("too few")
            .contains("2 violating and 2 passing"));
    }
}
