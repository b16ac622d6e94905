//! From what the model said about a turn to the verdict: each validator's score from its head
//! (the turn as written and the guard's other readings of it, see `readings.rs`) or its prompt,
//! the threshold, and the rejection when something failed.

use std::time::Instant;

use aegis_heads::{Features, Head};

use crate::analysis::{turn_to_read, Analysis};
use crate::error::{GuardError, Result};
use crate::guard::Guard;
use crate::heads::{head_input, own_head_input, EncoderRead};
use crate::language::Language;
use crate::readings::decide;
use crate::template::Validator;
use crate::verdict::{ModelRef, ScoreSource, Status, TemplateVersion, ValidatorResult, Verdict};

impl Guard {
    pub(crate) fn verdict(
        &self,
        text: &str,
        analysis: Analysis,
        started: Instant,
    ) -> Result<Verdict> {
        let reading = self.encoder_reading();
        let read = |output| EncoderRead {
            reading: &reading,
            output,
        };
        let seen = turn_to_read(text, &analysis.turn);
        // The language a head's map is chosen by: always what the text reads as, since the maps
        // were trained on what their rows read as (a configured reply language changes only the
        // rejection's language).
        let detected = Language::detect(text);
        let read_as = detected.code();
        let mut results = Vec::with_capacity(self.validators.len());
        let mut skipped = Vec::new();
        for ((v, head), answer) in self
            .validators
            .iter()
            .zip(&self.heads)
            .zip(&analysis.prompt_scores)
        {
            if !v.applies_to.covers(analysis.turn.role) {
                skipped.push(v.key.clone());
                continue;
            }
            let head_failed = |message: String| GuardError::HeadFailed {
                key: v.key.clone(),
                message,
            };
            let head_score = |head: &Head, encoder: Option<EncoderRead<'_>>| {
                let input = own_head_input(head, analysis.encoding.as_ref(), encoder)
                    .map_err(head_failed)?;
                // A reading of other layers (toxic's contempt reads layer 16's mean).
                let layers_input = |layers: &[usize]| {
                    let features = Features {
                        layers: layers.to_vec(),
                        ..head.features.clone()
                    };
                    head_input(&features, analysis.encoding.as_ref(), encoder)
                };
                head.probability(&input, read_as, &layers_input)
                    .map_err(|e| head_failed(e.to_string()))
            };
            let (learned, readings) = match head {
                Some(head) => {
                    let whole = head_score(head, analysis.encoder_output.as_ref().map(read))?;
                    let mut others = Vec::new();
                    if !head.features.encoder.is_decoder() {
                        for (other, output) in self.readings.iter().zip(&analysis.readings) {
                            let (Some(output), Some(combine)) = (output, other.combine(v, &seen))
                            else {
                                continue;
                            };
                            others.push((
                                other.name(),
                                combine,
                                head_score(head, Some(read(output)))?,
                            ));
                        }
                    }
                    let (learned, readings) = decide(whole, &others, v.threshold);
                    let elapsed = analysis
                        .encoding
                        .as_ref()
                        .map_or(started.elapsed().as_secs_f64() * 1e3, |e| e.elapsed_ms);
                    (Some((learned, elapsed)), readings)
                }
                None => (None, Vec::new()),
            };
            let (score, decided_by, latency_ms) = match (learned, answer) {
                (Some((p, ms)), _) => (p, ScoreSource::Head, ms),
                (None, Some(answer)) => (answer.p_yes, ScoreSource::Prompt, answer.elapsed_ms),
                (None, None) => {
                    return Err(head_failed(
                        "neither a head nor its prompt scored it".into(),
                    ))
                }
            };
            let passed = score < v.threshold;
            results.push(ValidatorResult {
                key: v.key.clone(),
                name: v.name.clone(),
                score,
                prompt_score: answer.as_ref().map(|a| a.p_yes),
                learned_score: learned.map(|(p, _)| p),
                readings,
                decided_by,
                head_hash: head
                    .as_ref()
                    .filter(|h| decided_by == ScoreSource::Head && !h.content_hash.is_empty())
                    .map(|h| h.content_hash.clone()),
                threshold: v.threshold,
                passed,
                latency_ms,
            });
        }
        let failed: Vec<&Validator> = self
            .validators
            .iter()
            .filter(|v| results.iter().any(|r| r.key == v.key && !r.passed))
            .collect();
        let language = self.language.unwrap_or(detected);
        let (status, case, rejection_message) = if failed.is_empty() {
            (Status::Passed, "aman".to_string(), String::new())
        } else {
            let case = failed
                .iter()
                .map(|v| v.key.as_str())
                .collect::<Vec<_>>()
                .join(", ");
            (
                Status::Failed,
                case,
                self.rejection_message(&failed, language),
            )
        };
        let info = self.model.info();
        Ok(Verdict {
            status,
            case,
            results,
            skipped,
            turn: analysis.turn,
            rejection_message,
            language,
            model: ModelRef {
                id: info.id.clone(),
                content_hash: info.content_hash.clone(),
            },
            encoder: self.encoder.as_ref().map(|encoder| ModelRef {
                id: encoder.info().id.clone(),
                content_hash: encoder.info().content_hash.clone(),
            }),
            templates: self
                .validators
                .iter()
                .map(|v| TemplateVersion {
                    key: v.key.clone(),
                    content_hash: v.content_hash.clone(),
                })
                .collect(),
            latency_ms: started.elapsed().as_secs_f64() * 1e3,
        })
    }
}
