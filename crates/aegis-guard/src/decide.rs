//! From what the model said about a turn to the verdict: each validator's score from its head
//! (the turn alone, in its context, with quotes read as mentioned) or its prompt, the threshold,
//! and the rejection when something failed.

use std::time::Instant;

use aegis_heads::Head;

use crate::analysis::Analysis;
use crate::context::ContextReading;
use crate::error::{GuardError, Result};
use crate::guard::Guard;
use crate::heads::{head_input, EncoderRead};
use crate::input::Role;
use crate::language::Language;
use crate::template::Validator;
use crate::verdict::{ModelRef, ScoreSource, Status, TemplateVersion, ValidatorResult, Verdict};

/// Why a head's decision came out as it did, where the context or a quote's reading changed it.
#[derive(Clone, Copy)]
struct Marks {
    /// Failed only because of the context: the turn's own score passes.
    caught_in_context: bool,
    /// Passed only because a quoted passage was read as mentioned: read whole it fails.
    read_as_mention: bool,
}

impl Guard {
    pub(crate) fn verdict(
        &self,
        text: &str,
        analysis: Analysis,
        started: Instant,
    ) -> Result<Verdict> {
        let reading = self.encoder_reading();
        let turn_read = analysis.encoder_output.as_ref().map(|output| EncoderRead {
            reading: &reading,
            output,
        });
        let context_read = analysis.context_output.as_ref().map(|output| EncoderRead {
            reading: &reading,
            output,
        });
        let frame_read = analysis.frame_output.as_ref().map(|output| EncoderRead {
            reading: &reading,
            output,
        });
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
                let input = head_input(&head.features, analysis.encoding.as_ref(), encoder)
                    .map_err(head_failed)?;
                head.probability(&input)
                    .map_err(|e| head_failed(e.to_string()))
            };
            let reads_frame = analysis.turn.role == Role::User
                && v.quote_reading.reads(analysis.frame_is_question);
            let (learned, context_score, mention_score) = match head {
                Some(head) => {
                    let whole = head_score(head, turn_read)?;
                    let mention_score = match frame_read
                        .filter(|_| reads_frame && !head.features.encoder.is_decoder())
                    {
                        Some(frame) => Some(head_score(head, Some(frame))?),
                        None => None,
                    };
                    let alone = mention_score.map_or(whole, |p| p.min(whole));
                    let in_context =
                        match context_read.filter(|_| !head.features.encoder.is_decoder()) {
                            Some(joined) => Some(head_score(head, Some(joined))?),
                            None => None,
                        };
                    // The decision from the turn's own score, as this validator reads context.
                    let decide = |own: f32| match (self.reading_for(v), in_context) {
                        (ContextReading::Joined, Some(p)) => p,
                        (ContextReading::Higher, Some(p)) => p.max(own),
                        _ => own,
                    };
                    let fails = |p: f32| p >= v.threshold;
                    let learned = decide(alone);
                    let marks = Marks {
                        caught_in_context: fails(learned) && in_context.is_some() && !fails(alone),
                        read_as_mention: !fails(learned) && fails(decide(whole)),
                    };
                    let elapsed = analysis
                        .encoding
                        .as_ref()
                        .map_or(started.elapsed().as_secs_f64() * 1e3, |e| e.elapsed_ms);
                    (Some((learned, elapsed, marks)), in_context, mention_score)
                }
                None => (None, None, None),
            };
            let (score, decided_by, latency_ms) = match (learned, answer) {
                (Some((p, ms, _)), _) => (p, ScoreSource::Head, ms),
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
                learned_score: learned.map(|(p, _, _)| p),
                context_score,
                caught_in_context: learned.is_some_and(|(_, _, m)| m.caught_in_context),
                mention_score,
                read_as_mention: learned.is_some_and(|(_, _, m)| m.read_as_mention),
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
        let language = self.language.unwrap_or_else(|| Language::detect(text));
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
