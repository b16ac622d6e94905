//! What the model says about a batch of turns before any verdict: the turns refused outright,
//! the context that fits, the encodings and readings the heads need, and the prompts that run.

use aegis_engine::{EncoderOutput, Encoding, EngineError, Prompt, Scored};

use crate::context::{fit_context, TurnReport};
use crate::error::{GuardError, Result};
use crate::guard::Guard;
use crate::heads::{encoding_prompt, layers_read};
use crate::input::GuardInput;
use crate::readings::TurnToRead;
use crate::template::Validator;

/// What the encoder read of a batch's runnable turns, by position among them (see
/// [`Guard::read_encoder`]).
struct EncoderReads {
    /// Each turn as written.
    alone: Vec<Option<Result<EncoderOutput>>>,
    /// Per turn, per reading of the guard's, in order: what it read where a head reads it.
    others: Vec<Vec<Option<Result<EncoderOutput>>>>,
}

/// What the model said about one turn: the shared encoding where a head reads it, and each
/// validator's prompt score where its prompt ran.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Analysis {
    pub encoding: Option<Encoding>,
    /// What the sentence encoder read of the turn as written (see [`Guard::encoder_reading`]),
    /// where a head reads it.
    pub encoder_output: Option<EncoderOutput>,
    /// Per reading of the guard's ([`Guard::readings`]), in order: what the encoder read, where
    /// a head reads it for this turn.
    pub readings: Vec<Option<EncoderOutput>>,
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
                .map(|&i| encoding_prompt(self.model.info().chat_format, inputs[i].text()))
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
            others: readings,
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
            .zip(readings)
            .zip(scores)
            .zip(prompted)
            .zip(turns);
        for (&i, (((((encoding, embedding), readings), scored), prompted), turn)) in
            runnable.iter().zip(per_input)
        {
            let analysis = (|| {
                let mut prompt_scores = vec![None; self.validators.len()];
                for (&v, answer) in prompted.iter().zip(scored.transpose()?.unwrap_or_default()) {
                    prompt_scores[v] = Some(answer);
                }
                Ok(Analysis {
                    encoding: encoding.transpose()?,
                    encoder_output: embedding.transpose()?,
                    readings: readings
                        .into_iter()
                        .map(Option::transpose)
                        .collect::<Result<_>>()?,
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

    /// The encoder's reading of each runnable turn as written, and of each of the guard's other
    /// readings where a head on the encoder reads it for that turn: all in one batch.
    fn read_encoder(
        &self,
        inputs: &[GuardInput],
        runnable: &[usize],
        turns: &[TurnReport],
    ) -> EncoderReads {
        let none = || (0..runnable.len()).map(|_| None).collect::<Vec<_>>();
        let mut reads = EncoderReads {
            alone: none(),
            others: (0..runnable.len())
                .map(|_| (0..self.readings.len()).map(|_| None).collect())
                .collect(),
        };
        let reading = self.encoder_reading();
        let Some(encoder) = self.encoder.as_ref().filter(|_| !reading.is_empty()) else {
            return reads;
        };
        let encoder_validators: Vec<&Validator> = self
            .validators
            .iter()
            .zip(&self.heads)
            .filter(|(_, head)| {
                head.as_ref()
                    .is_some_and(|h| !h.features.encoder.is_decoder())
            })
            .map(|(v, _)| v)
            .collect();
        let mut texts: Vec<String> = runnable
            .iter()
            .map(|&i| inputs[i].text().to_string())
            .collect();
        // (turn, reading) for each text after the turns themselves.
        let mut read_for = Vec::new();
        for (r, turn) in turns.iter().enumerate() {
            let seen = turn_to_read(inputs[runnable[r]].text(), turn);
            for (k, other) in self.readings.iter().enumerate() {
                if !encoder_validators
                    .iter()
                    .any(|v| other.combine(v, &seen).is_some())
                {
                    continue;
                }
                if let Some(text) = other.text(&seen) {
                    read_for.push((r, k));
                    texts.push(text);
                }
            }
        }
        let batch: Vec<&str> = texts.iter().map(String::as_str).collect();
        let started = std::time::Instant::now();
        let read = encoder.read_batch(&batch, &reading);
        tracing::debug!(
            texts = batch.len(),
            ms = started.elapsed().as_secs_f64() * 1e3,
            "encoder read"
        );
        let mut read = read.into_iter().map(|r| r.map_err(GuardError::from));
        for slot in reads.alone.iter_mut() {
            *slot = read.next();
        }
        for (r, k) in read_for {
            reads.others[r][k] = read.next();
        }
        reads
    }

    /// With heads on a sentence encoder the model may never see the message, so its context
    /// limit (`--max-context`) is checked here: the limit a user set holds whatever scores the
    /// message. The model's own passes check it themselves.
    fn over_the_models_context(&self, text: &str) -> Option<GuardError> {
        self.encoder.as_ref()?;
        let limit = self.model.info().context_length;
        if text.len() < limit {
            // A user's text never takes more tokens than it has bytes (each token spells at least
            // one byte of it), so nearly every message needs no count: one tokenisation fewer a
            // message on the model thread.
            return None;
        }
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

/// What a reading sees of `turn`, whose text is `text`.
pub(crate) fn turn_to_read<'a>(text: &'a str, turn: &'a TurnReport) -> TurnToRead<'a> {
    TurnToRead {
        text,
        role: turn.role,
        context: &turn.context,
    }
}
