//! What the model says about a batch of turns before any verdict: the turns refused outright,
//! the context that fits, the encodings and readings the heads need, and the prompts that run.

use aegis_engine::{EncoderOutput, Encoding, EngineError, Prompt, Scored};

use crate::context::{fit_context, joined_text, ContextReading, TurnReport};
use crate::error::{GuardError, Result};
use crate::guard::Guard;
use crate::heads::{encoding_prompt, layers_read};
use crate::input::{GuardInput, Role};
use crate::mention::{quoted_frame, QuoteReading};

/// The encoder's readings of a batch's runnable turns, by position among them (see
/// [`Guard::read_encoder`]).
struct EncoderReads {
    alone: Vec<Option<Result<EncoderOutput>>>,
    joined: Vec<Option<Result<EncoderOutput>>>,
    frame: Vec<Option<Result<EncoderOutput>>>,
    /// Whether each frame read asks a question (`quotes: mentioned` reads only those).
    frame_is_question: Vec<bool>,
}

/// What the model said about one turn: the shared encoding where a head reads it, and each
/// validator's prompt score where its prompt ran.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Analysis {
    pub encoding: Option<Encoding>,
    /// What the sentence encoder read (see [`Guard::encoder_reading`]), where a head reads it.
    pub encoder_output: Option<EncoderOutput>,
    /// What the encoder read of the turn joined to its context, where the turn has context and
    /// the heads read it (see [`ContextReading`]).
    pub context_output: Option<EncoderOutput>,
    /// What the encoder read of a user's question or report with its quoted passages elided,
    /// where it quotes something and a head reads quotes as mentioned (see [`QuoteReading`]).
    pub frame_output: Option<EncoderOutput>,
    /// Whether that frame asks a question (`quotes: mentioned` reads only those).
    pub frame_is_question: bool,
    /// Per validator, in validator order; `None` where the prompt did not run.
    pub prompt_scores: Vec<Option<Scored>>,
    /// The checked turn and the context read with it.
    pub turn: TurnReport,
}

impl Guard {
    /// What the model says about several turns (see [`Analysis`]): one batched encoding and one
    /// batched scoring call; each input gets its own result.
    pub(crate) fn analyse_inputs(&self, inputs: &[GuardInput]) -> Vec<Result<Analysis>> {
        let mut results: Vec<Option<Result<Analysis>>> = Vec::with_capacity(inputs.len());
        let mut runnable = Vec::new();
        let mut turns = Vec::new();
        for (i, input) in inputs.iter().enumerate() {
            match self.prepare(input) {
                Ok(turn) => {
                    results.push(None);
                    runnable.push(i);
                    turns.push(turn);
                }
                Err(problem) => results.push(Some(Err(problem))),
            }
        }
        let layers = layers_read(&self.heads);
        let mut encodings: Vec<Option<Result<Encoding>>> =
            (0..runnable.len()).map(|_| None).collect();
        if !layers.is_empty() && !runnable.is_empty() {
            let prompts: Vec<Prompt> = runnable
                .iter()
                .map(|&i| encoding_prompt(inputs[i].text()))
                .collect();
            for (slot, encoded) in encodings
                .iter_mut()
                .zip(self.model.encode_batch(&prompts, &layers))
            {
                *slot = Some(encoded.map_err(GuardError::from));
            }
        }
        let EncoderReads {
            alone: embeddings,
            joined: in_context,
            frame: frames,
            frame_is_question,
        } = self.read_encoder(inputs, &runnable, &turns);
        let prompted: Vec<Vec<usize>> = turns
            .iter()
            .map(|turn| {
                (0..self.validators.len())
                    .filter(|&v| self.prompt_scores || self.heads[v].is_none())
                    .filter(|&v| self.validators[v].applies_to.covers(turn.role))
                    .collect()
            })
            .collect();
        let mut scores: Vec<Option<Result<Vec<Scored>>>> =
            (0..runnable.len()).map(|_| None).collect();
        let asking: Vec<usize> = (0..runnable.len())
            .filter(|&r| !prompted[r].is_empty())
            .collect();
        if !asking.is_empty() {
            let prompts: Vec<Vec<Prompt>> = asking
                .iter()
                .map(|&r| {
                    prompted[r]
                        .iter()
                        .map(|&v| {
                            self.validators[v]
                                .prompt_in_context(inputs[runnable[r]].text(), &turns[r].context)
                        })
                        .collect()
                })
                .collect();
            for (&r, scored) in asking.iter().zip(self.model.score_batch(&prompts)) {
                scores[r] = Some(scored.map(|s| s.answers).map_err(GuardError::from));
            }
        }
        let per_input = encodings
            .into_iter()
            .zip(embeddings)
            .zip(in_context)
            .zip(frames.into_iter().zip(frame_is_question))
            .zip(scores)
            .zip(prompted)
            .zip(turns);
        for (
            &i,
            (
                (
                    ((((encoding, embedding), in_context), (frame, frame_is_question)), scored),
                    prompted,
                ),
                turn,
            ),
        ) in runnable.iter().zip(per_input)
        {
            let analysis = (|| {
                let mut prompt_scores = vec![None; self.validators.len()];
                for (&v, answer) in prompted.iter().zip(scored.transpose()?.unwrap_or_default()) {
                    prompt_scores[v] = Some(answer);
                }
                Ok(Analysis {
                    encoding: encoding.transpose()?,
                    encoder_output: embedding.transpose()?,
                    context_output: in_context.transpose()?,
                    frame_output: frame.transpose()?,
                    frame_is_question,
                    prompt_scores,
                    turn,
                })
            })();
            results[i] = Some(analysis.map_err(|e| self.explain_error(e, inputs[i].text())));
        }
        results
            .into_iter()
            .map(|r| r.unwrap_or(Err(GuardError::EmptyText)))
            .collect()
    }

    /// Refuses what cannot be checked, and fits the context to its budget.
    fn prepare(&self, input: &GuardInput) -> Result<TurnReport> {
        if input.text().trim().is_empty() {
            return Err(GuardError::EmptyText);
        }
        if let Some(index) = input
            .context
            .iter()
            .position(|t| t.content.trim().is_empty())
        {
            return Err(GuardError::BadTurn {
                index: Some(index),
                problem: "its content is empty".into(),
            });
        }
        if let Some(too_long) = self.over_the_models_context(input.text()) {
            return Err(too_long);
        }
        let (context, context_cut) = fit_context(&input.context, self.context_tokens, |text| {
            // A turn that cannot be counted is too odd to read as context.
            self.model.count_user_tokens(text).unwrap_or(usize::MAX / 2)
        });
        if context_cut > 0 {
            tracing::debug!(
                turn = input.index,
                context_cut,
                "context over its budget: oldest turns cut"
            );
        }
        Ok(TurnReport {
            index: input.index,
            role: input.turn.role,
            context,
            context_cut,
        })
    }

    /// The encoder's readings of each runnable turn, of the turn joined to its context where it
    /// has context and the heads read it, and of a user's question or report without its quotes
    /// where a head reads them as mentioned: all in one batch.
    fn read_encoder(
        &self,
        inputs: &[GuardInput],
        runnable: &[usize],
        turns: &[TurnReport],
    ) -> EncoderReads {
        let none = || (0..runnable.len()).map(|_| None).collect::<Vec<_>>();
        let mut reads = EncoderReads {
            alone: none(),
            joined: none(),
            frame: none(),
            frame_is_question: vec![false; runnable.len()],
        };
        let reading = self.encoder_reading();
        let Some(encoder) = self.encoder.as_ref().filter(|_| !reading.is_empty()) else {
            return reads;
        };
        let encoder_heads = || {
            self.validators
                .iter()
                .zip(&self.heads)
                .filter(|(_, head)| {
                    head.as_ref()
                        .is_some_and(|h| !h.features.encoder.is_decoder())
                })
                .map(|(v, _)| v)
        };
        let reads_context = encoder_heads().any(|v| self.reading_for(v) != ContextReading::Turn);
        let quote_readings: Vec<QuoteReading> = encoder_heads().map(|v| v.quote_reading).collect();
        let mut texts: Vec<String> = runnable
            .iter()
            .map(|&i| inputs[i].text().to_string())
            .collect();
        let with_context: Vec<usize> = (0..runnable.len())
            .filter(|&r| reads_context && !turns[r].context.is_empty())
            .collect();
        for &r in &with_context {
            texts.push(joined_text(&turns[r].context, inputs[runnable[r]].text()));
        }
        let mut with_frame = Vec::new();
        for (r, turn) in turns.iter().enumerate() {
            if turn.role != Role::User || quote_readings.iter().all(|&q| q == QuoteReading::Said) {
                continue;
            }
            let Some(frame) = quoted_frame(inputs[runnable[r]].text()) else {
                continue;
            };
            if quote_readings.iter().any(|q| q.reads(frame.is_question)) {
                with_frame.push(r);
                reads.frame_is_question[r] = frame.is_question;
                texts.push(frame.text);
            }
        }
        let batch: Vec<&str> = texts.iter().map(String::as_str).collect();
        let mut read = encoder
            .read_batch(&batch, &reading)
            .into_iter()
            .map(|r| r.map_err(GuardError::from));
        for slot in reads.alone.iter_mut() {
            *slot = read.next();
        }
        for &r in &with_context {
            reads.joined[r] = read.next();
        }
        for &r in &with_frame {
            reads.frame[r] = read.next();
        }
        reads
    }

    /// With heads on a sentence encoder the model may never see the message, so its context
    /// limit (`--max-context`) is checked here: the limit a user set holds whatever scores the
    /// message. The model's own passes check it themselves.
    fn over_the_models_context(&self, text: &str) -> Option<GuardError> {
        self.encoder.as_ref()?;
        let limit = self.model.info().context_length;
        let message_tokens = self.model.count_user_tokens(text).ok()?;
        (message_tokens > limit).then_some(GuardError::TooLong {
            message_tokens,
            prompt_tokens: message_tokens,
            limit,
        })
    }

    /// Turns the engine's "prompt too long" into one about the message, with both lengths.
    fn explain_error(&self, error: GuardError, text: &str) -> GuardError {
        match error {
            GuardError::Engine(EngineError::ContextExceeded {
                prompt_tokens,
                limit,
            }) => GuardError::TooLong {
                message_tokens: self.model.count_user_tokens(text).unwrap_or(0),
                prompt_tokens,
                limit,
            },
            other => other,
        }
    }
}
