//! The layout of a fit with a correction per detected language (issue 64): every row's input is
//! its features (the shared block, which every row teaches) followed by a copy of them in its
//! language's block (zeros in the other languages' blocks), so each language's block is a
//! correction only its rows teach. After the fit, each language's map is the shared block plus
//! its correction, folded into one.

use crate::error::{HeadError, Result};
use crate::example::Example;
use crate::fold_fits::ColumnScales;
use crate::head::LanguageMap;
use crate::hidden::HiddenLayer;

/// Rows of each class a language needs for a map of its own: fewer cannot choose a strength and
/// a calibration on held-out sources of that language alone, and its messages share the head's
/// map instead.
pub(crate) const MIN_LANGUAGE_CLASS_ROWS: usize = 30;

/// How much dearer a weight in a language's correction is than the same weight in the shared map
/// ([`ColumnScales::Corrections`]): where the languages agree, the shared map carries
/// `2·cost / (1 + 2·cost)` of the weight two languages need (four fifths at 2).
const LANGUAGE_CORRECTION_COST: f64 = 2.0;

/// The languages with a block of their own, and the width of one block.
pub(crate) struct LanguageBlocks<'a> {
    languages: Vec<&'a str>,
    width: usize,
}

impl<'a> LanguageBlocks<'a> {
    /// The detected languages whose rows hold [`MIN_LANGUAGE_CLASS_ROWS`] of each class, in
    /// order; `None` where no language does.
    pub(crate) fn of(examples: &'a [Example]) -> Result<Option<Self>> {
        let width = examples.first().map_or(0, |e| e.features.len());
        // Checked here as well as when the design is built: the widened rows are made first.
        if examples.iter().any(|e| e.features.len() != width) {
            return Err(HeadError::BadFeatures);
        }
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
        Ok((!languages.is_empty()).then_some(Self { languages, width }))
    }

    fn blocks(&self) -> usize {
        1 + self.languages.len()
    }

    /// The languages with a block of their own, in order.
    pub(crate) fn languages(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.languages.iter().copied()
    }

    /// Each row with its features in the shared block and in its language's.
    pub(crate) fn widen(&self, examples: &[Example]) -> Vec<Example> {
        self.widen_with(examples, |e| e.detected_language.as_str())
    }

    /// Each row as `language`'s map reads it: its features in the shared block and that
    /// language's, whatever the row's own language.
    pub(crate) fn widen_as(&self, examples: &[Example], language: &str) -> Vec<Example> {
        self.widen_with(examples, |_| language)
    }

    fn widen_with<'e>(
        &self,
        examples: &'e [Example],
        language_of: impl Fn(&'e Example) -> &'e str,
    ) -> Vec<Example> {
        examples
            .iter()
            .map(|e| {
                let mut features = Vec::with_capacity(self.width * self.blocks());
                features.extend_from_slice(&e.features);
                let own = language_of(e);
                for &language in &self.languages {
                    if own == language {
                        features.extend_from_slice(&e.features);
                    } else {
                        features.resize(features.len() + self.width, 0.0);
                    }
                }
                Example {
                    features,
                    ..e.clone()
                }
            })
            .collect()
    }

    /// The corrections' columns made dearer than the shared ones.
    pub(crate) fn scales(&self) -> ColumnScales {
        ColumnScales::Corrections {
            width: self.width,
            cost: LANGUAGE_CORRECTION_COST,
        }
    }

    /// The widened fit's map read back as the shared map (weights and hidden layer) and a map
    /// per language; the bias is common.
    pub(crate) fn maps(
        &self,
        weights: &[f32],
        hidden: Option<&HiddenLayer>,
        bias: f32,
    ) -> (Vec<f32>, Option<HiddenLayer>, Vec<LanguageMap>) {
        let map_of_blocks = |of: &[usize]| {
            let hidden = hidden.map(|layer| HiddenLayer {
                weights: self.sum_of_blocks(&layer.weights, of),
                bias: layer.bias.clone(),
                out: layer.out.clone(),
            });
            (self.sum_of_blocks(weights, of), hidden)
        };
        let languages = self
            .languages
            .iter()
            .enumerate()
            .map(|(k, language)| {
                let (weights, hidden) = map_of_blocks(&[0, k + 1]);
                LanguageMap {
                    language: language.to_string(),
                    weights,
                    bias,
                    hidden,
                }
            })
            .collect();
        let (weights, hidden) = map_of_blocks(&[0]);
        (weights, hidden, languages)
    }

    /// Each unit's row of widened weights holds the blocks; a map's weights are the sum of the
    /// blocks it reads: the shared block alone, or it and a language's correction.
    fn sum_of_blocks(&self, rows: &[f32], of: &[usize]) -> Vec<f32> {
        let width = self.width;
        rows.chunks_exact(width * self.blocks())
            .flat_map(|row| {
                (0..width).map(move |i| of.iter().map(|block| row[block * width + i]).sum())
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::head::LanguageRule;
    use crate::metrics::roc_auc;
    use crate::train::fixtures::fixture;
    use crate::train::{train, TrainOptions};

    /// Rows whose first feature means a violation in one language and the opposite in the
    /// other: one shared line ranks them at chance; a shared map with a correction per language
    /// ranks both on held-out sources, each language's map is the one its rows were scored with
    /// out of fold, and a language with too few rows of a class is scored by the shared map.
    /// Under the detected rule only: under the highest, each map reads the other language's rows
    /// the wrong way round and the higher of the two is high on every row; that rule is for
    /// languages that add violations of their own, not for languages that disagree.
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
            language_rule: LanguageRule::Detected,
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

    /// Under the highest rule a row's out-of-fold score is the highest of the languages' maps,
    /// as the head written scores it: a signal only Indonesian rows carry is caught on a row
    /// detected as English too, which the detected rule's English map does not learn.
    #[test]
    fn under_the_highest_rule_every_row_reads_every_map() {
        let mut examples = fixture(600);
        // Indonesian violations also carry the second feature; English rows never move it.
        for e in examples.iter_mut().filter(|e| e.detected_language == "id") {
            e.features[1] += if e.label { 0.8 } else { 0.0 };
        }
        let options = |language_rule| TrainOptions {
            by_language: true,
            language_rule,
            ..TrainOptions::default()
        };
        let highest = train(&examples, &options(LanguageRule::Highest)).expect("highest");
        assert_eq!(highest.language_rule, LanguageRule::Highest);
        assert!(highest.cv.roc_auc.expect("auc") > 0.8);
        // Out of fold as in the head: every row's score is the same whatever its language.
        let row = &examples[0].features;
        let by = |language: &str| highest.probability(row, language).expect("p");
        assert_eq!(by("en"), by("id"));
        assert_eq!(by("en"), by("fr"));
        let maps: Vec<f64> = highest
            .languages
            .iter()
            .map(|m| m.probability(row).expect("map"))
            .collect();
        assert_eq!(by("en"), maps.iter().copied().fold(0.0, f64::max));
        // An Indonesian-style violation (only the second feature) detected as English.
        let mut mixed = vec![0.0f32; row.len()];
        mixed[1] = 1.0;
        *mixed.last_mut().expect("constant") = 1.0;
        let detected = train(&examples, &options(LanguageRule::Detected)).expect("detected");
        let caught = highest.probability(&mixed, "en").expect("p");
        let missed = detected.probability(&mixed, "en").expect("p");
        assert!(
            caught > missed + 0.1,
            "highest {caught} against detected {missed}"
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
