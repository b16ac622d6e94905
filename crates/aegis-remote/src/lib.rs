//! The guard's models on a shared inference server: the decoder (llama.cpp's `llama-server` or
//! vLLM) behind the engine's `LanguageModel` trait, and the heads' sentence encoder (any
//! `/v1/embeddings` server) behind its `SentenceEncoder` trait. Prompts are rendered and
//! tokenised here, with the same tokenizer and prompt boundary as the local engine, and sent as
//! token ids; P(Yes) comes from the answer position's log-probabilities of `Yes` and `No`,
//! renormalised over the two.
//!
//! The trait is synchronous (the model worker's thread calls it); this crate owns a small Tokio
//! runtime to send a message's prompts concurrently, so the server can batch them. Call it from
//! plain threads (the worker's, or `spawn_blocking`), never from an async task.

mod client;
mod dialect;
mod encoder;
#[cfg(feature = "test-support")]
pub mod testing;

use std::path::Path;
use std::time::Instant;

use aegis_engine::{
    two_way_probability, EngineError, GemmaTokenizer, LanguageModel, ModelInfo, Prompt, Scored,
    Scores, Segment,
};
use futures_util::future::join_all;
use serde_json::Value;

pub use client::ClientOptions;
pub use dialect::Dialect;
pub use encoder::RemoteEncoder;

use client::Client;

/// Plain text both tokenizers must split alike: two languages, an emoji, a run of spaces, digits.
/// No control-token spelling: vLLM's tokenizer turns one into the control token even in plain
/// text, and the boundary does not rest on the server's tokenizer anyway (ids are sent).
pub const TOKENIZER_PROBE: &str =
    "Halo kak, makasih ya 🙏  Is this spam? Rp 50.000,00 — transfer sekarang!";

/// The context assumed when the server does not say its own.
const DEFAULT_CONTEXT: usize = 8192;

#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error(transparent)]
    Server(#[from] EngineError),
    #[error(
        "the server at {url} tokenizes differently from ours ({ours_file}): {probe:?} is {ours:?} here and {theirs:?} there; it must serve a Gemma 3 model (EmbeddingGemma for an encoder server)"
    )]
    TokenizerMismatch {
        url: String,
        ours_file: String,
        probe: &'static str,
        ours: Vec<u32>,
        theirs: Vec<u32>,
    },
    #[error("cannot start the backend's client: {0}")]
    Runtime(#[from] std::io::Error),
    #[error(
        "the Gemma 3 tokenizer is not at {0}: run scripts/setup-model.sh (prompts are tokenised here even when the model runs on a server)"
    )]
    NoTokenizer(std::path::PathBuf),
}

/// Whether `url` can name a model server: an http:// or https:// address with a host.
pub fn check_server_url(url: &str) -> Result<(), String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("model server {url:?}: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host().is_none() {
        return Err(format!(
            "model server {url:?}: use an http:// or https:// address, e.g. http://gpu-box:8000"
        ));
    }
    Ok(())
}

/// A Gemma 3 model served by another process.
pub struct RemoteModel {
    client: Client,
    /// Always `Some` until drop, which hands it back without blocking (a model may be dropped on
    /// an async task's thread, where a blocking shutdown would panic).
    runtime: Option<tokio::runtime::Runtime>,
    dialect: Dialect,
    tokenizer: GemmaTokenizer,
    info: ModelInfo,
    served: String,
    answer_ids: [u32; 2],
}

impl std::fmt::Debug for RemoteModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteModel")
            .field("dialect", &self.dialect)
            .field("info", &self.info)
            .finish()
    }
}

impl RemoteModel {
    /// `connect` with the Gemma 3 tokenizer that `scripts/setup-model.sh` caches (the same for
    /// every Gemma 3 size), with the default client options.
    pub fn connect_with_cached_tokenizer(url: &str) -> Result<Self, RemoteError> {
        Self::connect(url, &cached_tokenizer()?, ClientOptions::default())
    }

    /// Connects to the server at `url`: finds out which API it speaks and which model it serves,
    /// and checks that it tokenizes like `tokenizer_file` (the Gemma 3 tokenizer).
    pub fn connect(
        url: &str,
        tokenizer_file: &Path,
        options: ClientOptions,
    ) -> Result<Self, RemoteError> {
        let runtime = io_runtime("aegis-remote")?;
        let client = Client::new(url, options)?;
        let tokenizer = GemmaTokenizer::from_file(tokenizer_file)?;
        let answer_id = |token: &str| {
            tokenizer
                .token_id(token)
                .ok_or_else(|| EngineError::Tokenizer {
                    path: tokenizer_file.to_path_buf(),
                    message: format!("has no {token:?} token to score answers with"),
                })
        };
        let answer_ids = [answer_id("Yes")?, answer_id("No")?];
        let (dialect, served, context) = runtime.block_on(identify(&client))?;
        // Prompts go out as ids: the server must split text as we do, and say how it does.
        if !runtime.block_on(tokenizes_like_us(
            &client,
            dialect,
            &served,
            &tokenizer,
            tokenizer_file,
        ))? {
            return Err(client.error("/tokenize is not found there").into());
        }
        let info = ModelInfo {
            id: served.clone(),
            // A verdict names the server in place of a weight file's hash.
            content_hash: client.url().to_string(),
            device: "remote".into(),
            weight_format: dialect.name().into(),
            context_length: context.unwrap_or(DEFAULT_CONTEXT),
            // No hidden states come back from a server: learned heads cannot run on it.
            layers: 0,
            synthetic: false,
            // Its tokenizer was checked against Gemma's above: it serves a Gemma.
            chat_format: aegis_engine::ChatFormat::Gemma,
        };
        tracing::info!(url = %info.content_hash, model = %served, api = dialect.name(), context = info.context_length, "model server connected");
        Ok(Self {
            client,
            runtime: Some(runtime),
            dialect,
            tokenizer,
            info,
            served,
            answer_ids,
        })
    }

    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime
            .as_ref()
            .expect("the runtime lives until drop")
            .block_on(future)
    }

    /// Token ids of `prompt`, within the context.
    fn ids(&self, prompt: &[Segment]) -> Result<Vec<u32>, EngineError> {
        let ids = self.tokenizer.encode_prompt(prompt)?;
        if ids.len() > self.info.context_length {
            return Err(EngineError::ContextExceeded {
                prompt_tokens: ids.len(),
                limit: self.info.context_length,
            });
        }
        Ok(ids)
    }

    /// P(Yes) for one prompt's ids, from the server's log-probabilities.
    async fn p_yes(&self, ids: Vec<u32>, started: Instant) -> Result<Scored, EngineError> {
        let answer = self
            .client
            .post(
                self.dialect.completion_path(),
                &self.dialect.score_request(
                    &self.served,
                    &ids,
                    self.answer_ids,
                    self.client.options().reuse_server_cache,
                ),
            )
            .await?;
        let [yes, no] = self
            .dialect
            .answer_logprobs(&answer, self.answer_ids)
            .map_err(|m| self.client.error(m))?;
        let missing = |token: &str| {
            self.client.error(format!(
                "its answer leaves {token:?} out of the {} most likely tokens, so P(Yes) cannot be computed for this prompt",
                self.dialect.listed()
            ))
        };
        let (yes, no) = (
            yes.ok_or_else(|| missing("Yes"))?,
            no.ok_or_else(|| missing("No"))?,
        );
        Ok(Scored {
            // Log-probabilities differ from logits by one shared constant: the two-way softmax
            // of either is the same.
            p_yes: two_way_probability(yes, no),
            elapsed_ms: started.elapsed().as_secs_f64() * 1e3,
        })
    }
}

/// The Gemma 3 tokenizer `scripts/setup-model.sh` caches (the same for every Gemma 3 size and
/// for EmbeddingGemma): prompts and messages are tokenised here even when a server runs the model.
fn cached_tokenizer() -> Result<std::path::PathBuf, RemoteError> {
    let tokenizer = aegis_engine::default_model_dir().join("tokenizer.json");
    if tokenizer.is_file() {
        Ok(tokenizer)
    } else {
        Err(RemoteError::NoTokenizer(tokenizer))
    }
}

/// A runtime with one I/O thread of its own, so a health probe from another thread is answered
/// while the worker's batch is in flight (a current-thread runtime would serialise them).
fn io_runtime(name: &str) -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name(name)
        .enable_all()
        .build()
}

/// Whether the server splits text as `tokenizer` does: `false` where it has no `/tokenize`
/// (Text Embeddings Inference's OpenAI route, Ollama), an error naming both splits where it
/// splits differently.
async fn tokenizes_like_us(
    client: &Client,
    dialect: Dialect,
    served: &str,
    tokenizer: &GemmaTokenizer,
    tokenizer_file: &Path,
) -> Result<bool, RemoteError> {
    let ours = tokenizer.encode_segment(&Segment::User(TOKENIZER_PROBE.into()))?;
    let Some(answer) = client
        .post_optional(
            "/tokenize",
            &dialect.tokenize_request(served, TOKENIZER_PROBE),
        )
        .await?
    else {
        return Ok(false);
    };
    let theirs = Dialect::tokens(&answer).map_err(|m| client.error(m))?;
    if ours != theirs {
        return Err(RemoteError::TokenizerMismatch {
            url: client.url().to_string(),
            ours_file: tokenizer_file.display().to_string(),
            probe: TOKENIZER_PROBE,
            ours,
            theirs,
        });
    }
    Ok(true)
}

/// Which API the server at the client's URL speaks, the model it serves and its context.
async fn identify(client: &Client) -> Result<(Dialect, String, Option<usize>), EngineError> {
    let models = client.get("/v1/models").await?;
    let (served, listed_context) = dialect::served_model(&models).map_err(|m| client.error(m))?;
    // Only llama.cpp's server has /props; it also says the context each request gets.
    match client.get_optional("/props").await? {
        Some(props) => Ok((
            Dialect::LlamaCpp,
            served,
            dialect::llama_cpp_context(&props),
        )),
        None => Ok((Dialect::OpenAi, served, listed_context)),
    }
}

impl Drop for RemoteModel {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl LanguageModel for RemoteModel {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    /// Both servers answer `/health` with 200 once they serve (llama.cpp: 503 while loading).
    fn probe(&self) -> aegis_engine::Result<()> {
        self.block_on(self.client.probe("/health"))
    }

    fn count_user_tokens(&self, text: &str) -> aegis_engine::Result<usize> {
        self.tokenizer.count_user_tokens(text)
    }

    fn count_prompt_tokens(&self, prompt: &[Segment]) -> aegis_engine::Result<usize> {
        Ok(self.tokenizer.encode_prompt(prompt)?.len())
    }

    fn score(&self, prompts: &[Prompt]) -> aegis_engine::Result<Scores> {
        self.score_batch(&[prompts.to_vec()])
            .pop()
            .unwrap_or_else(|| Ok(Scores::default()))
    }

    /// Every prompt of every message goes out at once; the server batches them.
    fn score_batch(&self, messages: &[Vec<Prompt>]) -> Vec<aegis_engine::Result<Scores>> {
        let started = Instant::now();
        self.block_on(join_all(messages.iter().map(|prompts| async move {
            let ids = prompts
                .iter()
                .map(|p| self.ids(p))
                .collect::<Result<Vec<_>, _>>()?;
            let answers = join_all(ids.into_iter().map(|ids| self.p_yes(ids, started))).await;
            Ok(Scores {
                answers: answers.into_iter().collect::<Result<_, _>>()?,
            })
        })))
    }

    fn generate(
        &self,
        prompt: &[Segment],
        max_tokens: usize,
        on_text: &mut dyn FnMut(&str) -> std::ops::ControlFlow<()>,
    ) -> aegis_engine::Result<String> {
        let ids = self.ids(prompt)?;
        let request = self.dialect.generate_request(
            &self.served,
            &ids,
            max_tokens,
            self.tokenizer.stop_ids(),
            self.client.options().reuse_server_cache,
        );
        let answer: Value =
            self.block_on(self.client.post(self.dialect.completion_path(), &request))?;
        let text = self
            .dialect
            .generated_text(&answer)
            .map_err(|m| self.client.error(m))?;
        // The server answers in one piece, so there is nothing left to stop.
        let _ = on_text(&text);
        Ok(text)
    }
}
