//! The guard: every validator's question about one message, a verdict, and a rejection message.

use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use aegis_engine::{
    ChatFormat, EncoderInfo, EncoderReading, LanguageModel, Prompt, Segment, SentenceEncoder,
    Speaker,
};
use aegis_heads::{EncoderFingerprint, Head};

use crate::context::{ContextReading, DEFAULT_CONTEXT_TOKENS};
use crate::error::{GuardError, Result};
use crate::heads::{
    check_binding, encoder_fingerprint, encoder_reading, head_path, load_heads,
    switch_off_unread_readings,
};
use crate::input::GuardInput;
use crate::language::Language;
use crate::readings::{ExclamationElided, InContext, QuotesElided, Reading};
use crate::template::{load_validators, LoadedValidators, Validator};
pub use crate::verdict::{
    ModelRef, ScoreSource, Status, TemplateVersion, ValidatorResult, Verdict,
};

/// How the rejection message is written when something failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RejectionMode {
    /// The failed validators' messages from their front matter.
    #[default]
    Templated,
    /// Written by the model, at most this many tokens; falls back to the templated message.
    Generated { max_tokens: usize },
}

impl RejectionMode {
    /// Generated (at most 48 tokens: two short sentences) when `generate`, else templated: what
    /// a front end's "generate rejection messages" switch means.
    pub fn chosen(generate: bool) -> Self {
        if generate {
            Self::Generated { max_tokens: 48 }
        } else {
            Self::Templated
        }
    }
}

#[derive(Clone)]
pub struct Guard {
    pub(crate) model: Arc<dyn LanguageModel>,
    /// The sentence encoder heads read instead of the model's hidden states, when one is chosen.
    pub(crate) encoder: Option<Arc<dyn SentenceEncoder>>,
    pub(crate) validators: Vec<Validator>,
    /// One slot per validator.
    pub(crate) heads: Vec<Option<Head>>,
    rejection: RejectionMode,
    /// Rejection messages in this language, whatever the message's; detected when `None`.
    pub(crate) language: Option<Language>,
    /// Run every validator's own prompt, even where a head decides (the workbench's prompt
    /// column, the try panel, `--prompt-scores`).
    pub(crate) prompt_scores: bool,
    /// Tokens of earlier turns read with a checked turn, at most.
    pub(crate) context_tokens: usize,
    /// The readings besides the turn as written that heads on the sentence encoder make, in the
    /// order their scores meet.
    pub(crate) readings: Vec<Arc<dyn Reading>>,
    /// The encoder's fingerprint, computed the first time a head is trained (each head records
    /// it, and embedding the probes costs seconds on a CPU); shared by guards on the same
    /// encoder, emptied when the encoder changes.
    fingerprint: Arc<OnceLock<EncoderFingerprint>>,
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard")
            .field("model", &self.model.info().id)
            .field("validators", &self.validators.len())
            .finish()
    }
}

impl Guard {
    /// A guard scoring every validator by its prompt.
    pub fn new(model: Arc<dyn LanguageModel>, validators: Vec<Validator>) -> Self {
        Self {
            heads: vec![None; validators.len()],
            model,
            encoder: None,
            validators,
            rejection: RejectionMode::default(),
            language: None,
            prompt_scores: false,
            context_tokens: DEFAULT_CONTEXT_TOKENS,
            readings: vec![
                Arc::new(QuotesElided),
                Arc::new(ExclamationElided),
                Arc::new(InContext { forced: None }),
            ],
            fingerprint: Arc::default(),
        }
    }

    /// Loads the templates in `dir` and the heads in `dir/heads/`. Broken templates and unusable
    /// heads are returned beside the guard as warnings, not fatal, unless no template is usable.
    pub fn from_dir(model: Arc<dyn LanguageModel>, dir: &Path) -> Result<(Self, Vec<GuardError>)> {
        Self::from_dir_with_encoder(model, None, dir)
    }

    /// [`Self::from_dir`] with heads reading `encoder`'s embeddings instead of the model's hidden
    /// states: heads trained on the other are refused with a warning saying so.
    pub fn from_dir_with_encoder(
        model: Arc<dyn LanguageModel>,
        encoder: Option<Arc<dyn SentenceEncoder>>,
        dir: &Path,
    ) -> Result<(Self, Vec<GuardError>)> {
        let LoadedValidators {
            validators,
            mut errors,
        } = load_validators(dir)?;
        if validators.is_empty() {
            return Err(GuardError::NoValidators(dir.to_path_buf()));
        }
        let (heads, warnings) = load_heads(
            dir,
            &validators,
            model.info(),
            encoder.as_ref().map(|e| e.info()),
        );
        errors.extend(warnings);
        let mut validators = validators;
        if encoder.is_none() {
            // The templates' thresholds are tuned for the default heads on the sentence encoder;
            // a head on the hidden states carries the one tuned with it.
            for (validator, head) in validators.iter_mut().zip(&heads) {
                if let Some(threshold) = head.as_ref().and_then(|h| h.training.threshold) {
                    validator.threshold = threshold as f32;
                }
            }
        }
        let mut guard = Self::new(model, validators);
        guard.heads = heads;
        guard.encoder = encoder;
        Ok((guard, errors))
    }

    /// The templates and heads in `dir` read again, on this guard's model and encoder, with its
    /// rejection mode, language and prompt scores: what a live template edit needs, so a reload
    /// can never drop the encoder or the generated rejections the guard was built with.
    pub fn reload(&self, dir: &Path) -> Result<(Self, Vec<GuardError>)> {
        let (reloaded, problems) =
            Self::from_dir_with_encoder(self.model.clone(), self.encoder.clone(), dir)?;
        let mut reloaded = reloaded
            .with_rejection(self.rejection)
            .with_language(self.language)
            .with_prompt_scores(self.prompt_scores);
        // The readings carry the guard's context override (`with_context`) with them.
        reloaded.context_tokens = self.context_tokens;
        reloaded.readings = self.readings.clone();
        reloaded.fingerprint = self.fingerprint.clone();
        Ok((reloaded, problems))
    }

    /// Lets `head` score its validator, if it was trained for this model and template.
    pub fn with_head(mut self, mut head: Head) -> Result<Self> {
        let refused = |reason: String| GuardError::HeadRefused {
            path: head_path(Path::new(""), &head.validator, self.encoder.is_some()),
            reason,
        };
        let slot = self
            .validators
            .iter()
            .position(|v| v.key == head.validator)
            .ok_or_else(|| refused("no validator has this key".into()))?;
        check_binding(
            &head,
            &self.validators[slot],
            self.model.info(),
            self.encoder_info(),
        )
        .map_err(refused)?;
        for off in switch_off_unread_readings(&mut head, self.encoder_info(), Path::new("")) {
            tracing::warn!("{off}");
        }
        self.heads[slot] = Some(head);
        Ok(self)
    }

    /// Heads read `encoder`'s embeddings from now on (`None`: the model's hidden states); heads
    /// trained on the other are dropped, as loading would have refused them.
    pub fn with_encoder(mut self, encoder: Option<Arc<dyn SentenceEncoder>>) -> Self {
        self.encoder = encoder;
        self.fingerprint = Arc::default();
        let heads = std::mem::take(&mut self.heads);
        self.heads = heads
            .into_iter()
            .zip(&self.validators)
            .map(|(head, v)| {
                let mut head = head.filter(|h| {
                    check_binding(h, v, self.model.info(), self.encoder_info()).is_ok()
                })?;
                for off in switch_off_unread_readings(&mut head, self.encoder_info(), Path::new(""))
                {
                    tracing::warn!("{off}");
                }
                Some(head)
            })
            .collect();
        self
    }

    /// This guard with `edited` in place of the validator with its key (added when new): an edited
    /// template tried before it is saved. Heads read the shared encoding, not the template, so a
    /// validator's head stays with it.
    pub fn with_validator(&self, edited: Validator) -> Self {
        let mut validators = self.validators.clone();
        match validators.iter().position(|v| v.key == edited.key) {
            Some(slot) => validators[slot] = edited,
            None => validators.push(edited),
        }
        let heads = validators
            .iter()
            .map(|v| {
                let old = self.validators.iter().position(|o| o.key == v.key)?;
                self.heads[old]
                    .clone()
                    .filter(|h| check_binding(h, v, self.model.info(), self.encoder_info()).is_ok())
            })
            .collect();
        Self {
            model: self.model.clone(),
            encoder: self.encoder.clone(),
            validators,
            heads,
            rejection: self.rejection,
            language: self.language,
            prompt_scores: self.prompt_scores,
            context_tokens: self.context_tokens,
            readings: self.readings.clone(),
            fingerprint: self.fingerprint.clone(),
        }
    }

    /// Also runs the prompts of head-decided validators, so each verdict reports both scores.
    /// Costs one prompt per validator; the head still decides.
    pub fn with_prompt_scores(mut self, on: bool) -> Self {
        self.prompt_scores = on;
        self
    }

    /// Reads at most `tokens` of a turn's earlier turns; every head reads them as `reading`
    /// says, or (`None`) as its validator's front matter does.
    pub fn with_context(mut self, tokens: usize, reading: Option<ContextReading>) -> Self {
        self.context_tokens = tokens;
        self.with_reading(Arc::new(InContext { forced: reading }))
    }

    /// Heads on the sentence encoder also make `reading` of each turn, after the readings they
    /// make already (in place of one with its name).
    pub fn with_reading(mut self, reading: Arc<dyn Reading>) -> Self {
        match self
            .readings
            .iter()
            .position(|r| r.name() == reading.name())
        {
            Some(slot) => self.readings[slot] = reading,
            None => self.readings.push(reading),
        }
        self
    }

    /// Whether every validator's prompt runs (see `with_prompt_scores`).
    pub fn prompt_scores(&self) -> bool {
        self.prompt_scores
    }

    /// The head scoring each validator, in validator order.
    pub fn heads(&self) -> &[Option<Head>] {
        &self.heads
    }

    pub fn with_rejection(mut self, mode: RejectionMode) -> Self {
        self.rejection = mode;
        self
    }

    /// Writes rejection messages in `language` instead of the message's own (`None`: detect).
    pub fn with_language(mut self, language: Option<Language>) -> Self {
        self.language = language;
        self
    }

    pub fn validators(&self) -> &[Validator] {
        &self.validators
    }

    /// The validator whose template is `<key>.txt`.
    pub fn validator(&self, key: &str) -> Option<&Validator> {
        self.validators.iter().find(|v| v.key == key)
    }

    pub fn model(&self) -> &Arc<dyn LanguageModel> {
        &self.model
    }

    /// The sentence encoder the heads read, when one was chosen.
    pub fn encoder(&self) -> Option<&Arc<dyn SentenceEncoder>> {
        self.encoder.as_ref()
    }

    /// The heads' encoder's fingerprint ([`encoder_fingerprint`]), embedded once per encoder
    /// however many heads are trained on it; `None` without an encoder.
    pub fn encoder_fingerprint(&self) -> Option<aegis_engine::Result<EncoderFingerprint>> {
        let encoder = self.encoder.as_ref()?;
        if let Some(known) = self.fingerprint.get() {
            return Some(Ok(known.clone()));
        }
        Some(encoder_fingerprint(encoder.as_ref()).inspect(|computed| {
            // Two threads may both compute it; they get the same probes' embeddings.
            let _ = self.fingerprint.set(computed.clone());
        }))
    }

    fn encoder_info(&self) -> Option<&EncoderInfo> {
        self.encoder.as_ref().map(|e| e.info())
    }

    /// What the encoder reads of each message for this guard's heads: only the layers they name
    /// (the pass stops after the deepest), and the embedding only where a head reads it.
    pub fn encoder_reading(&self) -> EncoderReading {
        encoder_reading(&self.heads)
    }

    pub fn check(&self, text: &str) -> Result<Verdict> {
        self.check_batch(&[text]).remove(0)
    }

    /// Verdicts on several messages, each a user's turn alone, scored in one batch.
    pub fn check_batch(&self, texts: &[&str]) -> Vec<Result<Verdict>> {
        let inputs: Vec<GuardInput> = texts.iter().map(|t| GuardInput::message(*t)).collect();
        self.check_inputs(&inputs)
    }

    /// Verdicts on several turns, scored in one batch (the worker drains concurrent requests
    /// into this); each gets its own verdict or error.
    pub fn check_inputs(&self, inputs: &[GuardInput]) -> Vec<Result<Verdict>> {
        let started = Instant::now();
        let analyses = self.analyse_inputs(inputs);
        let analysed = started.elapsed();
        let verdicts = analyses
            .into_iter()
            .zip(inputs)
            .map(|(analysis, input)| self.verdict(input.text(), analysis?, started))
            .collect();
        tracing::debug!(
            messages = inputs.len(),
            analyse_ms = analysed.as_secs_f64() * 1e3,
            verdicts_ms = (started.elapsed() - analysed).as_secs_f64() * 1e3,
            "checked"
        );
        verdicts
    }

    fn templated_rejection(failed: &[&Validator], language: Language) -> String {
        failed
            .iter()
            .map(|v| v.rejection.for_language(language).trim())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The prompt, in the model's chat `format`, the model writes a rejection from.
    pub fn rejection_prompt(
        format: ChatFormat,
        failed: &[&Validator],
        language: Language,
    ) -> Prompt {
        // The user's text is deliberately left out: the message only names the policies, so a
        // crafted message cannot steer what the guard says back.
        let policies = failed
            .iter()
            .map(|v| v.name.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let language_name = match language {
            Language::Indonesian => "Indonesian",
            Language::English => "English",
        };
        // One template segment, so it is tokenised as one text whatever the markup.
        vec![Segment::Template(format!(
            "{open}Write one short, polite sentence in {language_name} telling a user that you cannot help with their message because it goes against these policies: {policies}. Reply with the sentence only.{close}{answer}",
            open = format.open(Speaker::User),
            close = format.close(),
            answer = format.open(Speaker::Model),
        ))]
    }

    /// The rejection for `failed` validators in `language`, as this guard's mode writes it.
    pub fn rejection_message(&self, failed: &[&Validator], language: Language) -> String {
        let templated = Self::templated_rejection(failed, language);
        let RejectionMode::Generated { max_tokens } = self.rejection else {
            return templated;
        };
        let prompt = Self::rejection_prompt(self.model.info().chat_format, failed, language);
        match self
            .model
            .generate(&prompt, max_tokens, &mut aegis_engine::whole_answer)
        {
            Ok(text) if !text.trim().is_empty() => text.trim().to_string(),
            Ok(_) => templated,
            Err(e) => {
                tracing::warn!(error = %e, "generating the rejection failed; using the templated message");
                templated
            }
        }
    }
}
