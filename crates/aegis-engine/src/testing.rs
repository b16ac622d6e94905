//! What other crates' tests need from the engine (feature `test-support`): a fake model behind
//! the `LanguageModel` trait for logic around the model, and the real default model loaded once
//! per test binary for everything that needs real verdicts.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use crate::{
    Encoding, EngineError, GemmaEngine, LanguageModel, ModelInfo, ModelRequest, Prompt, Scored,
    Scores, Segment,
};

/// The default model, loaded on first use and shared by every test in the binary: loading takes
/// seconds and a few hundred MiB.
pub fn default_engine() -> &'static Arc<GemmaEngine> {
    static ENGINE: OnceLock<Arc<GemmaEngine>> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let (engine, _) = ModelRequest::new("default").load().unwrap_or_else(|e| {
            panic!("the default model must be set up for these tests (scripts/setup-model.sh): {e}")
        });
        Arc::new(engine)
    })
}

/// Answers each prompt with a fixed score chosen by the validator's question; encodes a message
/// as its word count (layer 1) or its length in bytes (layer 2), beside a constant 1.
pub struct FakeModel {
    pub info: ModelInfo,
    /// A prompt containing the marker scores its value; any other scores 0.1.
    pub scores: Vec<(&'static str, f32)>,
    /// What generation returns; `None` makes it fail.
    pub generated: Option<&'static str>,
    /// A prompt containing this panics when scored or encoded: a bug in the model's code.
    pub panics_on: Option<&'static str>,
    /// Prompts scored and messages encoded so far, for tests of what ran.
    pub prompts_run: AtomicUsize,
    pub encodings_run: AtomicUsize,
}

impl FakeModel {
    /// A model of 64 words of context and two layers.
    pub fn new(scores: Vec<(&'static str, f32)>) -> Self {
        Self {
            info: ModelInfo {
                id: "fake".into(),
                content_hash: "0".repeat(64),
                device: "cpu".into(),
                weight_format: "f32".into(),
                context_length: 64,
                layers: 2,
                synthetic: false,
                chat_format: crate::ChatFormat::Gemma,
            },
            scores,
            generated: None,
            panics_on: None,
            prompts_run: AtomicUsize::new(0),
            encodings_run: AtomicUsize::new(0),
        }
    }
}

impl FakeModel {
    fn panic_if_asked(&self, prompts: &[Prompt]) {
        if let Some(marker) = self.panics_on {
            if prompts.iter().any(|p| text_of(p).contains(marker)) {
                panic!("the fake model panicked on {marker:?}");
            }
        }
    }
}

fn text_of(prompt: &[Segment]) -> String {
    prompt
        .iter()
        .map(|s| match s {
            Segment::Template(t) | Segment::User(t) => t.as_str(),
        })
        .collect()
}

impl LanguageModel for FakeModel {
    fn info(&self) -> &ModelInfo {
        &self.info
    }
    fn count_user_tokens(&self, text: &str) -> crate::Result<usize> {
        Ok(text.split_whitespace().count())
    }
    fn count_prompt_tokens(&self, prompt: &[Segment]) -> crate::Result<usize> {
        Ok(text_of(prompt).split_whitespace().count())
    }
    fn score(&self, prompts: &[Prompt]) -> crate::Result<Scores> {
        self.panic_if_asked(prompts);
        self.prompts_run.fetch_add(prompts.len(), Ordering::Relaxed);
        let answers = prompts
            .iter()
            .map(|p| {
                let tokens = self.count_prompt_tokens(p)?;
                if tokens > self.info.context_length {
                    return Err(EngineError::ContextExceeded {
                        prompt_tokens: tokens,
                        limit: self.info.context_length,
                    });
                }
                let text = text_of(p);
                let p_yes = self
                    .scores
                    .iter()
                    .find(|(marker, _)| text.contains(marker))
                    .map(|(_, s)| *s)
                    .unwrap_or(0.1);
                Ok(Scored {
                    p_yes,
                    elapsed_ms: 1.0,
                })
            })
            .collect::<crate::Result<Vec<_>>>()?;
        Ok(Scores { answers })
    }
    fn encode_batch(&self, prompts: &[Prompt], layers: &[usize]) -> Vec<crate::Result<Encoding>> {
        self.panic_if_asked(prompts);
        prompts
            .iter()
            .map(|p| {
                self.encodings_run.fetch_add(1, Ordering::Relaxed);
                let tokens = self.count_prompt_tokens(p)?;
                if tokens > self.info.context_length {
                    return Err(EngineError::ContextExceeded {
                        prompt_tokens: tokens,
                        limit: self.info.context_length,
                    });
                }
                let user: String = p
                    .iter()
                    .filter_map(|s| match s {
                        Segment::User(t) => Some(t.as_str()),
                        Segment::Template(_) => None,
                    })
                    .collect();
                let means = layers
                    .iter()
                    .map(|&layer| match layer {
                        1 => Ok(vec![user.split_whitespace().count() as f32, 1.0]),
                        2 => Ok(vec![user.len() as f32, 1.0]),
                        other => Err(EngineError::UnknownLayer {
                            layer: other,
                            layers: 2,
                        }),
                    })
                    .collect::<crate::Result<_>>()?;
                Ok(Encoding {
                    layers: layers.to_vec(),
                    means,
                    elapsed_ms: 0.5,
                })
            })
            .collect()
    }
    fn generate(
        &self,
        _: &[Segment],
        _: usize,
        on_text: &mut dyn FnMut(&str) -> std::ops::ControlFlow<()>,
    ) -> crate::Result<String> {
        match self.generated {
            Some(text) => {
                let _ = on_text(text);
                Ok(text.to_string())
            }
            None => Err(EngineError::EmptyPrompt),
        }
    }
}

/// A sentence encoder whose embedding of a text is `[words, 1.0]` (and layer `l`'s mean
/// `[words * l, 1.0]`): heads on it can be written by hand. Counts the texts it embedded.
pub struct FakeEncoder {
    pub info: crate::EncoderInfo,
    pub embedded: AtomicUsize,
    /// What the last call asked to read.
    pub last_reading: std::sync::Mutex<Option<crate::EncoderReading>>,
}

impl FakeEncoder {
    pub fn new() -> Self {
        Self {
            info: crate::EncoderInfo {
                id: "fake-encoder".into(),
                content_hash: "e".repeat(64),
                prompt: "task: classification | query: ".into(),
                dimensions: 2,
                context_length: 64,
                layers: 2,
                device: "cpu".into(),
                weight_format: "f32".into(),
                matches_weights: None,
            },
            embedded: AtomicUsize::new(0),
            last_reading: std::sync::Mutex::new(None),
        }
    }
}

impl Default for FakeEncoder {
    fn default() -> Self {
        Self::new()
    }
}

impl crate::SentenceEncoder for FakeEncoder {
    fn info(&self) -> &crate::EncoderInfo {
        &self.info
    }

    fn read_batch(
        &self,
        texts: &[&str],
        reading: &crate::EncoderReading,
    ) -> Vec<crate::Result<crate::EncoderOutput>> {
        if let Ok(mut last) = self.last_reading.lock() {
            *last = Some(reading.clone());
        }
        texts
            .iter()
            .map(|text| {
                self.embedded.fetch_add(1, Ordering::Relaxed);
                let words = text.split_whitespace().count() as f32;
                Ok(crate::EncoderOutput {
                    // Layer `l`'s mean is `[words * l, 1.0]`.
                    layer_means: reading
                        .layers
                        .iter()
                        .map(|&l| vec![words * l as f32, 1.0])
                        .collect(),
                    embedding: reading.embedding.then(|| vec![words, 1.0]),
                    // Token `k` (one a word, at least one) is `[k + 1, 1.0]`.
                    token_states: reading.token_states.then(|| {
                        (0..(words as usize).max(1))
                            .flat_map(|k| [k as f32 + 1.0, 1.0])
                            .collect()
                    }),
                })
            })
            .collect()
    }

    fn plan(
        &self,
        text: &str,
        _reading: &crate::EncoderReading,
    ) -> crate::Result<crate::ComputePlan> {
        let tokens = text.split_whitespace().count();
        Ok(crate::ComputePlan {
            prompt_tokens: tokens,
            computed_tokens: tokens,
            flops: 0.0,
        })
    }
}
