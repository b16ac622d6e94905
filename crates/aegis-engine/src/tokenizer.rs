//! Gemma 3 tokenisation with the prompt boundary as a security boundary: template text may contain
//! control tokens (`<start_of_turn>`, ...); user text never produces one, whatever it contains.

use std::collections::HashSet;
use std::ops::Range;
use std::path::Path;

use tokenizers::{AddedToken, AddedVocabulary, Tokenizer};

use crate::error::{EngineError, Result};

/// One piece of a prompt. Templates are trusted; user text is data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// Template text: `<start_of_turn>` and friends become control tokens.
    Template(String),
    /// User text: tokenised as plain text, control-token strings included.
    User(String),
}

/// A tokenised prompt and where the user's text lies in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedPrompt {
    pub ids: Vec<u32>,
    /// Token ranges produced by `Segment::User` segments, in order.
    pub user_spans: Vec<Range<usize>>,
}

#[derive(Debug, Clone)]
pub struct GemmaTokenizer {
    /// Parses special tokens; used for templates.
    template: Tokenizer,
    /// The same vocabulary with control tokens removed from the added-token matcher.
    user: Tokenizer,
    control_ids: HashSet<u32>,
    bos_id: u32,
    end_of_turn_id: u32,
    eos_id: u32,
}

/// Added tokens that steer the model rather than spell text. Gemma's added vocabulary also holds
/// whitespace runs and HTML tags, which are ordinary text and must keep tokenising as such.
fn is_control(content: &str, special: bool) -> bool {
    special
        || content == "<mask>"
        || content == "[multimodal]"
        || (content.starts_with("<unused") && content.ends_with('>'))
}

impl GemmaTokenizer {
    /// Parses the file once: the user's tokenizer is the template's with the control tokens
    /// left out of a fresh added vocabulary, built as the file's own parse builds one (the same
    /// tokens in id order, the order Gemma's files list them), not parsed again. Gemma's file is 33 MB of vocabulary and merges,
    /// about a second to parse here, and the guard's model and its encoder each load one.
    pub fn from_file(path: &Path) -> Result<Self> {
        let err = |message: String| EngineError::Tokenizer {
            path: path.to_path_buf(),
            message,
        };
        let raw = std::fs::read(path).map_err(|e| EngineError::io(path, e))?;
        let template = Tokenizer::from_bytes(&raw).map_err(|e| err(e.to_string()))?;
        let mut added: Vec<(u32, AddedToken)> =
            template.get_added_tokens_decoder().into_iter().collect();
        if added.is_empty() {
            return Err(err("no added tokens".to_string()));
        }
        added.sort_by_key(|(id, _)| *id);
        let (control, kept): (Vec<_>, Vec<_>) = added
            .into_iter()
            .partition(|(_, token)| is_control(&token.content, token.special));
        let control_ids = control.into_iter().map(|(id, _)| id).collect();
        let mut user = template.clone();
        user.with_added_vocabulary(AddedVocabulary::new());
        user.add_tokens(kept.into_iter().map(|(_, token)| token))
            .map_err(|e| err(e.to_string()))?;

        let id_of = |token: &str| {
            template.token_to_id(token).ok_or_else(|| {
                err(format!(
                    "has no {token} token; is this a Gemma 3 tokenizer?"
                ))
            })
        };
        Ok(Self {
            bos_id: id_of("<bos>")?,
            end_of_turn_id: id_of("<end_of_turn>")?,
            eos_id: id_of("<eos>")?,
            template,
            user,
            control_ids,
        })
    }

    /// Tokenises a prompt: `<bos>`, then each segment with the rule for its kind.
    pub fn encode_prompt(&self, segments: &[Segment]) -> Result<Vec<u32>> {
        Ok(self.encode_prompt_with_spans(segments)?.ids)
    }

    /// Like [`Self::encode_prompt`], also saying which positions hold the user's text.
    pub fn encode_prompt_with_spans(&self, segments: &[Segment]) -> Result<EncodedPrompt> {
        let mut ids = vec![self.bos_id];
        let mut user_spans = Vec::new();
        for segment in segments {
            let start = ids.len();
            ids.extend(self.encode_segment(segment)?);
            if matches!(segment, Segment::User(_)) && ids.len() > start {
                user_spans.push(start..ids.len());
            }
        }
        Ok(EncodedPrompt { ids, user_spans })
    }

    pub fn encode_segment(&self, segment: &Segment) -> Result<Vec<u32>> {
        match segment {
            Segment::Template(text) => self.encode_with(&self.template, text),
            Segment::User(text) => {
                let ids = self.encode_with(&self.user, text)?;
                // Defence in depth: the matcher no longer knows control tokens, and the BPE merges
                // cannot build them, but a tokenizer file we did not expect must not open the door.
                if let Some(&id) = ids.iter().find(|id| self.control_ids.contains(id)) {
                    return Err(EngineError::ControlTokenInUserText { id });
                }
                Ok(ids)
            }
        }
    }

    fn encode_with(&self, tokenizer: &Tokenizer, text: &str) -> Result<Vec<u32>> {
        if text.is_empty() {
            return Ok(Vec::new());
        }
        tokenizer
            .encode_fast(text, false)
            .map(|enc| enc.get_ids().to_vec())
            .map_err(|e| EngineError::Tokenize(e.to_string()))
    }

    /// Number of tokens the user's text takes on its own.
    pub fn count_user_tokens(&self, text: &str) -> Result<usize> {
        Ok(self.encode_segment(&Segment::User(text.to_string()))?.len())
    }

    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.template
            .decode(ids, true)
            .map_err(|e| EngineError::Tokenize(e.to_string()))
    }

    /// The id of a token spelled exactly so, e.g. `Yes`.
    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.template.token_to_id(token)
    }

    pub fn is_control(&self, id: u32) -> bool {
        self.control_ids.contains(&id)
    }

    /// `<eos>`: EmbeddingGemma's tokenizer closes every text with it.
    pub fn eos_id(&self) -> u32 {
        self.eos_id
    }

    /// Tokens that end a model turn.
    pub fn stop_ids(&self) -> [u32; 2] {
        [self.end_of_turn_id, self.eos_id]
    }
}
