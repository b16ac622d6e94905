//! A map per detected language (issue 64): a shared map every row teaches, and a correction per
//! language that only its rows teach, learnt in one fit.

use crate::error::{HeadError, Result};
use crate::fold_fits::ColumnScales;
use crate::head::LanguageMap;
use crate::hidden::HiddenLayer;

use super::{train_one_map, Example, TrainOptions, Trained};

/// Rows of each class a language needs for a map of its own: fewer cannot choose a strength and
/// a calibration on held-out sources of that language alone, and its messages share the head's
/// map instead.
pub(crate) const MIN_LANGUAGE_CLASS_ROWS: usize = 30;

/// How much dearer a weight in a language's correction is than the same weight in the shared map
/// ([`ColumnScales::Corrections`]): where the languages agree, the shared map carries
/// `2·cost / (1 + 2·cost)` of the weight two languages need (four fifths at 2).
const LANGUAGE_CORRECTION_COST: f64 = 2.0;

/// The detected languages whose rows hold [`MIN_LANGUAGE_CLASS_ROWS`] of each class, in order.
fn languages_with_their_own_map(examples: &[Example]) -> Vec<&str> {
    let mut languages: Vec<&str> = examples
        .iter()
        .map(|e| e.detected_language.as_str())
        .collect();
    languages.sort_unstable();
    languages.dedup();
    languages.retain(|&language| {
        let (rows, positives) = examples
            .iter()
            .filter(|e| e.detected_language == language)
            .fold((0, 0), |(rows, positives), e| {
                (rows + 1, positives + usize::from(e.label))
            });
        positives.min(rows - positives) >= MIN_LANGUAGE_CLASS_ROWS
    });
    languages
}

/// One fit on every row whose input is the message's features followed by a copy of them in its
/// detected language's block (zeros in the other languages' blocks): the first block is a map
/// every row teaches, each language's block a correction only its rows teach, and the L2 keeps
/// the corrections small, so a language departs from the shared map only where its rows insist.
/// Maps trained on one language's rows alone (session 60) won back English's public sources but
/// gave up recall everywhere, each map seeing half the rows. The head keeps the shared map; each
/// language's map is the shared one plus its correction, folded into one (the bias is common).
pub(super) fn with_language_corrections(
    examples: &[Example],
    options: &TrainOptions,
) -> Result<Trained> {
    let one_map = TrainOptions {
        by_language: false,
        ..options.clone()
    };
    let languages = languages_with_their_own_map(examples);
    let width = examples.first().map_or(0, |e| e.features.len());
    if languages.is_empty() {
        return train_one_map(examples, &one_map, ColumnScales::Own);
    }
    if examples.iter().any(|e| e.features.len() != width) {
        return Err(HeadError::BadFeatures);
    }
    let blocks = 1 + languages.len();
    let augmented: Vec<Example> = examples
        .iter()
        .map(|e| {
            let mut features = Vec::with_capacity(width * blocks);
            features.extend_from_slice(&e.features);
            for &language in &languages {
                if e.detected_language == language {
                    features.extend_from_slice(&e.features);
                } else {
                    features.resize(features.len() + width, 0.0);
                }
            }
            Example {
                features,
                ..e.clone()
            }
        })
        .collect();
    let scales = ColumnScales::Corrections {
        width,
        cost: LANGUAGE_CORRECTION_COST,
    };
    let joint = train_one_map(&augmented, &one_map, scales)?;
    // Each unit's row of joint weights holds `blocks` blocks of `width`; a map's weights are
    // the sum of the blocks it reads: the shared block alone, or it and a language's correction.
    let sum_of_blocks = |rows: &[f32], of: &[usize]| -> Vec<f32> {
        rows.chunks_exact(width * blocks)
            .flat_map(|row| {
                (0..width).map(move |i| of.iter().map(|block| row[block * width + i]).sum())
            })
            .collect()
    };
    let map_of_blocks = |of: &[usize]| {
        let weights = sum_of_blocks(&joint.weights, of);
        let hidden = joint.hidden.as_ref().map(|layer| HiddenLayer {
            weights: sum_of_blocks(&layer.weights, of),
            bias: layer.bias.clone(),
            out: layer.out.clone(),
        });
        (weights, hidden)
    };
    let maps = languages
        .iter()
        .enumerate()
        .map(|(k, language)| {
            let (weights, hidden) = map_of_blocks(&[0, k + 1]);
            LanguageMap {
                language: language.to_string(),
                weights,
                bias: joint.bias,
                hidden,
            }
        })
        .collect();
    let (weights, hidden) = map_of_blocks(&[0]);
    Ok(Trained {
        weights,
        hidden,
        languages: maps,
        ..joint
    })
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::fixture;
    use super::*;
    use crate::metrics::roc_auc;
    use crate::train::train;

    /// Rows whose first feature means a violation in one language and the opposite in the
    /// other: one shared line ranks them at chance; a shared map with a correction per language
    /// ranks both on held-out sources, each language's map is the one its rows were scored with
    /// out of fold, and a language with too few rows of a class is scored by the shared map.
    #[test]
    fn a_correction_per_language_learns_what_the_languages_disagree_on() {
        let mut examples = fixture(400);
        // The fixture's signal, +0.3 or -0.3 on the first feature, turned round in Indonesian.
        for e in examples.iter_mut().filter(|e| e.detected_language == "id") {
            e.features[0] += if e.label { -0.6 } else { 0.6 };
        }
        let shared = train(&examples, &TrainOptions::default()).expect("shared");
        let options = TrainOptions {
            by_language: true,
            ..TrainOptions::default()
        };
        let by_language = train(&examples, &options).expect("by language");
        let shared_auc = shared.cv.roc_auc.expect("auc");
        let auc = by_language.cv.roc_auc.expect("auc");
        assert!(shared_auc < 0.7, "one line cannot: {shared_auc}");
        assert!(auc > 0.85, "a correction per language: {auc}");
        let languages: Vec<&str> = by_language
            .languages
            .iter()
            .map(|m| m.language.as_str())
            .collect();
        assert_eq!(languages, ["en", "id"]);
        assert!(by_language.languages[0].weights[0] > 0.0);
        assert!(by_language.languages[1].weights[0] < 0.0);
        for language in ["en", "id"] {
            let auc = by_language.cv_by_language[language].roc_auc.expect("auc");
            assert!(auc > 0.85, "{language}: {auc}");
        }
        // The folded maps score as the joint fit did: in sample, each language's rows ranked by
        // its map, and another language's map ranks them the wrong way round.
        let labels_of = |language: &str| -> Vec<bool> {
            examples
                .iter()
                .filter(|e| e.detected_language == language)
                .map(|e| e.label)
                .collect()
        };
        let scored_by = |rows: &str, map: &str| -> f64 {
            let scores: Vec<f64> = examples
                .iter()
                .filter(|e| e.detected_language == rows)
                .map(|e| by_language.probability(&e.features, map).expect("width"))
                .collect();
            roc_auc(&scores, &labels_of(rows)).expect("auc")
        };
        assert!(scored_by("id", "id") > 0.9 && scored_by("en", "en") > 0.9);
        assert!(scored_by("id", "en") < 0.2, "{}", scored_by("id", "en"));
        assert_eq!(train(&examples, &options).expect("again"), by_language);

        // Indonesian with fewer positives than a map needs: its rows get no correction.
        let few: Vec<Example> = examples
            .iter()
            .filter(|e| e.detected_language == "en" || !e.label)
            .cloned()
            .chain(
                examples
                    .iter()
                    .filter(|e| e.detected_language == "id" && e.label)
                    .take(MIN_LANGUAGE_CLASS_ROWS - 1)
                    .cloned(),
            )
            .collect();
        let trained = train(&few, &options).expect("few");
        let languages: Vec<&str> = trained
            .languages
            .iter()
            .map(|m| m.language.as_str())
            .collect();
        assert_eq!(languages, ["en"]);
        let row = &few[0];
        assert_eq!(
            trained.probability(&row.features, "id").expect("width"),
            trained.probability(&row.features, "other").expect("width"),
            "the shared map"
        );
    }

    /// Where the languages agree, the L2 leaves the agreement to the shared map, which every row
    /// teaches: each language's correction stays a small part of its map.
    #[test]
    fn where_the_languages_agree_the_corrections_stay_small() {
        let examples = fixture(400);
        let options = TrainOptions {
            by_language: true,
            ..TrainOptions::default()
        };
        let trained = train(&examples, &options).expect("train");
        let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
        for map in &trained.languages {
            let correction: Vec<f32> = map
                .weights
                .iter()
                .zip(&trained.weights)
                .map(|(own, shared)| own - shared)
                .collect();
            assert!(
                norm(&correction) < 0.5 * norm(&trained.weights),
                "{}: correction {} against shared {}",
                map.language,
                norm(&correction),
                norm(&trained.weights)
            );
        }
    }
}
