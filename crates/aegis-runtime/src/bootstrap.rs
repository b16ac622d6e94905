//! The one way a guard is built from what a user chose: the command line, the desktop app, the
//! HTTP server and the bench all describe their choice as a [`GuardSetup`] and call
//! [`GuardSetup::load`], so the model or model server, the encoder the heads read, the templates
//! and the rejection messages are decided in one place and cannot drift apart.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use aegis_engine::{
    resolve_encoder, DownloadReport, EmbeddingGemma, EncoderArithmetic, EncoderSpec, EngineError,
    HubOptions, LanguageModel, ModelRequest, SentenceEncoder,
};
use aegis_guard::{Guard, GuardError, Language, RejectionMode};
use aegis_heads::{Encoder, EncoderFingerprint, Head};
use aegis_remote::{RemoteEncoder, RemoteError, RemoteModel};

/// The encoder heads read by default: EmbeddingGemma-300M, measured better than the 270M's
/// hidden states on sources the heads never saw (README, "Learned heads").
pub const DEFAULT_HEADS_READ: &str = "embeddinggemma";

/// Where the guard's model comes from.
#[derive(Clone)]
pub enum ModelSource {
    /// Loaded here by the engine.
    Local(ModelRequest),
    /// A shared inference server (llama.cpp's `llama-server` or vLLM); prompts are still rendered
    /// and tokenised here.
    Server(String),
    /// Already loaded by the caller (a test binary shares one engine; `aegis eval --compare`
    /// builds two guards on one model).
    Loaded(Arc<dyn LanguageModel>),
}

impl ModelSource {
    /// What the user would call it: the model's name or the server's address.
    pub fn name(&self) -> String {
        match self {
            Self::Local(request) => request.model.clone(),
            Self::Server(url) => url.clone(),
            Self::Loaded(model) => model.info().id.clone(),
        }
    }
}

/// What learned heads read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadsRead {
    /// The guard model's own hidden states (`decoder`): no second model to download.
    Decoder,
    /// A sentence encoder's embedding (`embeddinggemma`, a folder or a hub id).
    Encoder(EncoderSpec),
    /// The same embedding from a shared server's `/v1/embeddings` (`--encoder-server URL`),
    /// accepted only when it embeds the heads' probe texts as they recorded.
    Served(String),
}

impl HeadsRead {
    /// `decoder`, `embeddinggemma`, a sentence-transformers folder or a hub id.
    pub fn parse(raw: &str) -> Result<Self, SetupError> {
        match raw.trim() {
            "decoder" => Ok(Self::Decoder),
            "" => Err(SetupError::Encoder {
                name: raw.to_string(),
                source: EngineError::ModelNotFound(
                    "no encoder named: use decoder or embeddinggemma".into(),
                ),
            }),
            other => EncoderSpec::parse(other)
                .map(Self::Encoder)
                .map_err(|source| SetupError::Encoder {
                    name: raw.to_string(),
                    source,
                }),
        }
    }

    pub fn is_encoder(&self) -> bool {
        !matches!(self, Self::Decoder)
    }

    /// What the heads read once `encoder_server` is taken into account: a server's embeddings
    /// stand in for a local encoder, never for the decoder's hidden states.
    pub fn served_by(self, encoder_server: Option<&str>) -> Result<Self, SetupError> {
        match (self, encoder_server.map(str::trim).filter(|u| !u.is_empty())) {
            (heads_read, None) => Ok(heads_read),
            (Self::Decoder, Some(url)) => Err(SetupError::EncoderServer {
                url: url.to_string(),
                reason: "heads on the model's hidden states cannot read a server's embeddings; leave out --encoder decoder".into(),
            }),
            (_, Some(url)) => {
                aegis_remote::check_server_url(url).map_err(|reason| SetupError::EncoderServer {
                    url: url.to_string(),
                    reason,
                })?;
                Ok(Self::Served(url.to_string()))
            }
        }
    }
}

/// Everything that decides how a guard is built.
#[derive(Clone)]
pub struct GuardSetup {
    pub model: ModelSource,
    pub heads_read: HeadsRead,
    /// How a local encoder computes its layers (`--encoder-weights`): the bf16 kernels, or int8
    /// on a CPU with VNNI.
    pub encoder_arithmetic: EncoderArithmetic,
    /// The templates folder (heads in its `heads/`).
    pub prompts: PathBuf,
    pub rejection: RejectionMode,
    /// Rejection messages in this language; `None` writes them in the message's own.
    pub language: Option<Language>,
}

/// A built guard and what was wrong on the way, for the caller to show its way.
pub struct BuiltGuard {
    pub guard: Guard,
    /// Broken templates and refused heads: their validators fell back or were left out.
    pub problems: Vec<GuardError>,
    /// Why no head can run at all (a model server returns no hidden states), said once instead
    /// of once per refused head.
    pub heads_unavailable: Option<String>,
}

impl BuiltGuard {
    /// The problems worth showing: refused heads are left out when `heads_unavailable` already
    /// says why for all of them.
    pub fn problems_to_report(&self) -> impl Iterator<Item = &GuardError> {
        let all_refused = self.heads_unavailable.is_some();
        self.problems
            .iter()
            .filter(move |p| !(all_refused && matches!(p, GuardError::HeadRefused { .. })))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("loading {model}: {source}")]
    Model { model: String, source: EngineError },
    /// Boxed: a remote error is large, and every setup call returns this type.
    #[error("the model server at {url}: {source}")]
    Server {
        url: String,
        source: Box<RemoteError>,
    },
    #[error("the encoder {name:?}: {source}")]
    Encoder { name: String, source: EngineError },
    #[error("the encoder server at {url}: {reason}")]
    EncoderServer { url: String, reason: String },
    #[error(transparent)]
    Guard(#[from] GuardError),
}

impl GuardSetup {
    /// The guard with everything loaded: the model (or server connection), the encoder when the
    /// heads read one, the templates and heads.
    pub fn load(&self) -> Result<BuiltGuard, SetupError> {
        let (model, encoder) = self.load_model_and_encoder()?;
        self.guard_on(model, encoder, &self.prompts)
    }

    /// [`Self::load_model`] and [`Self::load_encoder`] at once, on two threads: each spends
    /// seconds on work of its own (a tokenizer to parse, weights to read and pack), so a guard is
    /// ready when the slower is rather than after both. The model's error is reported first.
    #[allow(clippy::type_complexity)]
    pub fn load_model_and_encoder(
        &self,
    ) -> Result<(Arc<dyn LanguageModel>, Option<Arc<dyn SentenceEncoder>>), SetupError> {
        let (model, encoder) = std::thread::scope(|scope| {
            let encoder = scope.spawn(|| self.load_encoder());
            let model = self.load_model();
            let encoder = encoder
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (model, encoder)
        });
        Ok((model?, encoder?))
    }

    /// The guard's model, as the setup names it.
    pub fn load_model(&self) -> Result<Arc<dyn LanguageModel>, SetupError> {
        match &self.model {
            ModelSource::Loaded(model) => Ok(model.clone()),
            ModelSource::Server(url) => RemoteModel::connect_with_cached_tokenizer(url)
                .map(|remote| Arc::new(remote) as Arc<dyn LanguageModel>)
                .map_err(|source| SetupError::Server {
                    url: url.clone(),
                    source: Box::new(source),
                }),
            ModelSource::Local(request) => {
                let started = Instant::now();
                let mut request = request.clone();
                // A sentence encoder shares the memory: the engine keeps less for itself.
                request.options.beside_encoder = self.heads_read.is_encoder();
                let (engine, _) = request.load().map_err(|source| SetupError::Model {
                    model: request.model.clone(),
                    source,
                })?;
                tracing::info!(
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "model ready"
                );
                Ok(Arc::new(engine))
            }
        }
    }

    /// The sentence encoder the heads read, on the model's device, downloaded the way the model
    /// would be; `None` when heads read the model's hidden states.
    pub fn load_encoder(&self) -> Result<Option<Arc<dyn SentenceEncoder>>, SetupError> {
        let spec = match &self.heads_read {
            HeadsRead::Decoder => return Ok(None),
            HeadsRead::Served(url) => return self.connect_encoder(url).map(Some),
            HeadsRead::Encoder(spec) => spec,
        };
        let failed = |source| SetupError::Encoder {
            name: format!("{spec:?}"),
            source,
        };
        let (hub, device) = match &self.model {
            ModelSource::Local(request) => (hub_options(request), request.options.device),
            // No local request to follow: the app's and the CLI's defaults.
            _ => (HubOptions::default(), Default::default()),
        };
        let started = Instant::now();
        let folder = resolve_encoder(spec, &hub).map_err(failed)?;
        let adapter = aegis_guard::encoder_adapter(&self.prompts);
        let mut encoder = EmbeddingGemma::load_adapted(
            &folder,
            device,
            self.encoder_arithmetic,
            adapter.as_deref(),
        )
        .map_err(failed)?;
        // A copy whose files hash otherwise (`aegis model encoder-bf16`) is checked the way a
        // server is: by its embeddings of the heads' probes. Where that fails the heads are
        // refused as for any other encoder, with the hash named. An adapted encoder is other
        // weights by intent, however close its probes: heads of the plain one stay refused.
        if adapter.is_none() && !heads_read_weights(&self.prompts, &encoder.info().content_hash) {
            match aegis_guard::encoder_fingerprint(&encoder)
                .map_err(|e| e.to_string())
                .and_then(|served| fingerprinted_weights(&self.prompts, &served))
            {
                Ok(Some(content_hash)) => encoder.accept_as(&content_hash),
                Ok(None) => {}
                Err(reason) => tracing::warn!(%reason, "encoder not accepted by fingerprint"),
            }
        }
        tracing::info!(
            elapsed_ms = started.elapsed().as_millis() as u64,
            folder = %folder.display(),
            adapter = ?adapter,
            accepted_as = ?encoder.info().matches_weights,
            "encoder ready"
        );
        Ok(Some(Arc::new(encoder)))
    }

    /// The encoder on the server at `url`, accepted for the heads in the templates folder that
    /// read an encoder when its embeddings of their probe texts match what they recorded.
    fn connect_encoder(&self, url: &str) -> Result<Arc<dyn SentenceEncoder>, SetupError> {
        let refused = |reason: String| SetupError::EncoderServer {
            url: url.to_string(),
            reason,
        };
        let started = Instant::now();
        let mut encoder = RemoteEncoder::connect_with_cached_tokenizer(url)
            .map_err(|e| refused(e.to_string()))?;
        let served =
            aegis_guard::encoder_fingerprint(&encoder).map_err(|e| refused(e.to_string()))?;
        let accepted = fingerprinted_weights(&self.prompts, &served).map_err(refused)?;
        if let Some(content_hash) = &accepted {
            encoder.accept_as(content_hash);
        }
        tracing::info!(
            elapsed_ms = started.elapsed().as_millis() as u64,
            accepted_as = ?accepted,
            "encoder server checked"
        );
        Ok(Arc::new(encoder))
    }

    /// A guard from the templates in `dir` on an already loaded model and encoder, with this
    /// setup's rejection mode and language.
    pub fn guard_on(
        &self,
        model: Arc<dyn LanguageModel>,
        encoder: Option<Arc<dyn SentenceEncoder>>,
        dir: &Path,
    ) -> Result<BuiltGuard, SetupError> {
        // Heads on an encoder run here whatever serves the model.
        let heads_unavailable =
            aegis_guard::heads_unavailable(model.info()).filter(|_| encoder.is_none());
        let (guard, problems) = Guard::from_dir_with_encoder(model, encoder, dir)?;
        Ok(BuiltGuard {
            guard: guard
                .with_rejection(self.rejection)
                .with_language(self.language),
            problems,
            heads_unavailable,
        })
    }
}

/// The weights (their `content_hash`) that the heads in `prompts` read and that `served`
/// embeds the probes as they recorded; `None` when no head there reads an encoder. An error
/// says why the server is refused, with both figures, when heads read an encoder and none of
/// their fingerprints match.
fn fingerprinted_weights(
    prompts: &Path,
    served: &EncoderFingerprint,
) -> Result<Option<String>, String> {
    let mut reasons = Vec::new();
    for (name, head) in encoder_heads(prompts) {
        match &head.model.fingerprint {
            None => reasons.push(format!(
                "{name} records no encoder fingerprint to check a server against; retrain it with `aegis train --encoder embeddinggemma`"
            )),
            Some(recorded) => match recorded.check(served) {
                Ok(()) => return Ok(Some(head.model.content_hash.clone())),
                Err(reason) => reasons.push(format!("{name}: {reason}")),
            },
        }
    }
    match reasons.first() {
        None => Ok(None),
        Some(first) => Err(format!(
            "it does not compute the embedding the heads were trained on: {first}"
        )),
    }
}

/// Whether the heads in `prompts` that read an encoder were trained on the weights hashing to
/// `content_hash` (or none reads an encoder): then no fingerprint needs checking.
fn heads_read_weights(prompts: &Path, content_hash: &str) -> bool {
    let heads = encoder_heads(prompts);
    heads.is_empty()
        || heads
            .iter()
            .any(|(_, head)| head.model.content_hash == content_hash)
}

/// The heads in `prompts` that read a sentence encoder, with their file names, in name order;
/// unreadable files are left to the guard, which reports them.
fn encoder_heads(prompts: &Path) -> Vec<(String, Head)> {
    let dir = aegis_guard::heads_dir(prompts, true);
    let entries = std::fs::read_dir(&dir).into_iter().flatten().flatten();
    let mut paths: Vec<PathBuf> = entries
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .filter_map(|path| {
            let head = Head::load(&path).ok()?;
            let name = path.file_name()?.to_string_lossy().into_owned();
            (head.features.encoder != Encoder::Decoder).then_some((name, head))
        })
        .collect()
}

/// The hub options that download an encoder the way `request` downloads its model.
fn hub_options(request: &ModelRequest) -> HubOptions {
    let mut hub = HubOptions {
        offline: request.offline,
        ..HubOptions::default()
    };
    match &request.download {
        DownloadReport::Quiet => {}
        DownloadReport::TerminalBar => hub.progress = true,
        DownloadReport::Listener(listener) => hub.on_download = Some(listener.clone()),
    }
    hub
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_read_parses_the_names_users_type() {
        assert_eq!(HeadsRead::parse("decoder").ok(), Some(HeadsRead::Decoder));
        assert_eq!(
            HeadsRead::parse(" embeddinggemma ").ok(),
            Some(HeadsRead::Encoder(EncoderSpec::EmbeddingGemma))
        );
        assert!(HeadsRead::parse(DEFAULT_HEADS_READ)
            .expect("default")
            .is_encoder());
        assert!(HeadsRead::parse("  ").is_err());
    }
}
