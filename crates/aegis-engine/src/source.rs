//! Where a model's files come from: the default cache (filled by `scripts/setup-model.sh`), a local
//! GGUF file, a local Hugging Face style directory, or a Hugging Face hub repository id.

use std::path::{Path, PathBuf};

use crate::error::{EngineError, Result};

/// File name of the default model inside the default model directory.
pub const DEFAULT_GGUF_NAME: &str = "gemma-3-270m-q4_k_m.gguf";
/// Environment variable that overrides the default model directory.
pub const MODEL_DIR_ENV: &str = "AEGIS_MODEL_DIR";

/// What the user asked for, before anything is resolved on disk or on the network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSpec {
    /// The default model in the default model directory.
    Default,
    /// A path on disk: a `.gguf` file or a directory.
    Local(PathBuf),
    /// A Hugging Face hub repository id, `owner/name`, optionally `owner/name@revision`.
    Hub {
        repo: String,
        revision: Option<String>,
    },
}

impl ModelSpec {
    /// Reads a model argument: an existing path wins; otherwise `owner/name` is a hub id.
    pub fn parse(raw: &str) -> Result<Self> {
        let raw = raw.trim();
        if raw.is_empty() || raw == "default" {
            return Ok(Self::Default);
        }
        let path = Path::new(raw);
        if path.exists() {
            return Ok(Self::Local(path.to_path_buf()));
        }
        let (repo, revision) = match raw.split_once('@') {
            Some((repo, rev)) => (repo, Some(rev.to_string())),
            None => (raw, None),
        };
        let looks_like_repo = repo.split('/').count() == 2
            && repo.split('/').all(|part| {
                !part.is_empty()
                    && part
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            });
        if looks_like_repo && !raw.ends_with(".gguf") {
            Ok(Self::Hub {
                repo: repo.to_string(),
                revision,
            })
        } else {
            Err(EngineError::ModelNotFound(format!(
                "{raw} is neither an existing file or directory nor a Hugging Face repo id (owner/name)"
            )))
        }
    }
}

/// Where the weights live once resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WeightFiles {
    Gguf(PathBuf),
    /// `config.json` plus one or more `.safetensors` files, in a stable order.
    Safetensors {
        config: PathBuf,
        shards: Vec<PathBuf>,
    },
}

/// A model whose files are all on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedModel {
    /// A human-readable name: the hub id, or the file name.
    pub id: String,
    pub weights: WeightFiles,
    pub tokenizer: PathBuf,
}

/// The directory `scripts/setup-model.sh` fills; the tokenizer there serves every Gemma 3 size.
pub fn default_model_dir() -> PathBuf {
    cached_model_dir(MODEL_DIR_ENV, "gemma-3-270m")
}

/// `$env` if set, else `<platform cache>/aegis/models/<name>`: where the setup scripts put a model.
pub(crate) fn cached_model_dir(env: &str, name: &str) -> PathBuf {
    match std::env::var_os(env) {
        Some(dir) => PathBuf::from(dir),
        None => dirs::cache_dir()
            .unwrap_or_else(std::env::temp_dir)
            .join("aegis")
            .join("models")
            .join(name),
    }
}

/// How the hub is reached when a hub id is not in the local cache.
/// Where a download stands: the file, and bytes so far of its total.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DownloadProgress {
    pub file: String,
    pub downloaded: u64,
    pub total: u64,
}

/// Called as a hub download advances (the desktop app draws it).
pub type DownloadListener = std::sync::Arc<dyn Fn(&DownloadProgress) + Send + Sync>;

#[derive(Clone, Default)]
pub struct HubOptions {
    /// Never touch the network; only the local Hugging Face cache is consulted.
    pub offline: bool,
    /// Show a progress bar on the terminal while downloading.
    pub progress: bool,
    /// Told of every downloaded chunk, instead of the terminal bar.
    pub on_download: Option<DownloadListener>,
    /// The Hugging Face cache root (`.../hub`); defaults to `$HF_HOME/hub` or `~/.cache/huggingface/hub`.
    pub cache_dir: Option<PathBuf>,
    /// Hub address; defaults to `$HF_ENDPOINT`, else huggingface.co.
    pub endpoint: Option<String>,
}

impl std::fmt::Debug for HubOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubOptions")
            .field("offline", &self.offline)
            .field("progress", &self.progress)
            .field("on_download", &self.on_download.is_some())
            .field("cache_dir", &self.cache_dir)
            .field("endpoint", &self.endpoint)
            .finish()
    }
}

/// Adapts a listener to hf-hub's progress trait.
struct ListenerProgress {
    listener: DownloadListener,
    state: DownloadProgress,
}

impl hf_hub::api::Progress for ListenerProgress {
    fn init(&mut self, size: usize, filename: &str) {
        self.state = DownloadProgress {
            file: filename.to_string(),
            downloaded: 0,
            total: size as u64,
        };
        (self.listener)(&self.state);
    }
    fn update(&mut self, size: usize) {
        self.state.downloaded += size as u64;
        (self.listener)(&self.state);
    }
    fn finish(&mut self) {
        self.state.downloaded = self.state.total;
        (self.listener)(&self.state);
    }
}

pub fn resolve(spec: &ModelSpec, hub: &HubOptions) -> Result<ResolvedModel> {
    match spec {
        ModelSpec::Default => resolve_default(),
        ModelSpec::Local(path) => resolve_local(path),
        ModelSpec::Hub { repo, revision } => resolve_hub(repo, revision.as_deref(), hub),
    }
}

fn resolve_default() -> Result<ResolvedModel> {
    let dir = default_model_dir();
    let gguf = dir.join(DEFAULT_GGUF_NAME);
    let tokenizer = dir.join("tokenizer.json");
    for path in [&gguf, &tokenizer] {
        if !path.is_file() {
            return Err(EngineError::ModelNotFound(format!(
                "{} is missing; run scripts/setup-model.sh to fetch the default model (or set {MODEL_DIR_ENV})",
                path.display()
            )));
        }
    }
    Ok(ResolvedModel {
        id: "gemma-3-270m (Q4_K_M)".to_string(),
        weights: WeightFiles::Gguf(gguf),
        tokenizer,
    })
}

fn resolve_local(path: &Path) -> Result<ResolvedModel> {
    let id = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    if path.is_file() {
        if path.extension().and_then(|e| e.to_str()) != Some("gguf") {
            return Err(EngineError::invalid(
                path,
                "a model file must be a .gguf file",
            ));
        }
        let tokenizer = tokenizer_beside(path.parent().unwrap_or(Path::new(".")))?;
        return Ok(ResolvedModel {
            id,
            weights: WeightFiles::Gguf(path.to_path_buf()),
            tokenizer,
        });
    }
    let weights = weights_in_dir(path)?;
    let tokenizer = tokenizer_beside(path)?;
    Ok(ResolvedModel {
        id,
        weights,
        tokenizer,
    })
}

/// Finds the weights in a directory: a single GGUF (multimodal projector files aside), or
/// `config.json` with safetensors shards.
fn weights_in_dir(dir: &Path) -> Result<WeightFiles> {
    let entries = std::fs::read_dir(dir).map_err(|e| EngineError::io(dir, e))?;
    let mut ggufs = Vec::new();
    let mut shards = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| EngineError::io(dir, e))?.path();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_lowercase())
            .unwrap_or_default();
        if name.ends_with(".gguf") && !name.contains("mmproj") {
            ggufs.push(path);
        } else if name.ends_with(".safetensors") {
            shards.push(path);
        }
    }
    ggufs.sort();
    shards.sort();
    let config = dir.join("config.json");
    if !shards.is_empty() && config.is_file() {
        return Ok(WeightFiles::Safetensors { config, shards });
    }
    match ggufs.len() {
        1 => Ok(WeightFiles::Gguf(ggufs.remove(0))),
        0 => Err(EngineError::invalid(
            dir,
            "no model weights here: expected one .gguf file, or config.json with .safetensors files",
        )),
        _ => Err(EngineError::invalid(
            dir,
            format!(
                "several .gguf files here ({}); name the one to use",
                ggufs
                    .iter()
                    .filter_map(|p| p.file_name())
                    .map(|n| n.to_string_lossy())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// `tokenizer.json` next to the weights, else the default one: Gemma 3 shares one tokenizer
/// across sizes, and GGUF-only repositories often ship none.
fn tokenizer_beside(dir: &Path) -> Result<PathBuf> {
    let local = dir.join("tokenizer.json");
    if local.is_file() {
        return Ok(local);
    }
    let fallback = default_model_dir().join("tokenizer.json");
    if fallback.is_file() {
        return Ok(fallback);
    }
    Err(EngineError::ModelNotFound(format!(
        "no tokenizer.json in {} nor in {}; run scripts/setup-model.sh to fetch the Gemma 3 tokenizer",
        dir.display(),
        fallback.display()
    )))
}

pub(crate) fn hub_cache_dir(hub: &HubOptions) -> PathBuf {
    hub.cache_dir
        .clone()
        .unwrap_or_else(|| hf_hub::Cache::from_env().path().clone())
}

fn resolve_hub(repo: &str, revision: Option<&str>, hub: &HubOptions) -> Result<ResolvedModel> {
    let cache_dir = hub_cache_dir(hub);
    if let Some(snapshot) = cached_snapshot(&cache_dir, repo, revision.unwrap_or("main")) {
        if let Ok(weights) = weights_in_dir(&snapshot) {
            tracing::info!(repo, snapshot = %snapshot.display(), "using cached hub snapshot");
            return Ok(ResolvedModel {
                id: repo.to_string(),
                weights,
                tokenizer: tokenizer_beside(&snapshot)?,
            });
        }
    }
    if hub.offline {
        return Err(EngineError::ModelNotFound(format!(
            "{repo} is not in the Hugging Face cache at {} and offline mode is on",
            cache_dir.display()
        )));
    }
    download_from_hub(repo, revision, &cache_dir, hub)
}

/// The snapshot directory the Hugging Face cache layout records for `revision`
/// (`models--owner--name/refs/<revision>` holds the commit; `snapshots/<commit>/` the files).
pub(crate) fn cached_snapshot(cache_dir: &Path, repo: &str, revision: &str) -> Option<PathBuf> {
    let repo_dir = cache_dir.join(format!("models--{}", repo.replace('/', "--")));
    let commit = std::fs::read_to_string(repo_dir.join("refs").join(revision))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| revision.to_string());
    let snapshot = repo_dir.join("snapshots").join(commit);
    snapshot.is_dir().then_some(snapshot)
}

fn download_from_hub(
    repo: &str,
    revision: Option<&str>,
    cache_dir: &Path,
    hub: &HubOptions,
) -> Result<ResolvedModel> {
    let snapshot = download_snapshot(repo, revision, cache_dir, hub, |files| {
        choose_hub_files(files).ok_or_else(|| {
            format!(
                "found no .gguf file nor config.json with .safetensors among {} files",
                files.len()
            )
        })
    })?;
    Ok(ResolvedModel {
        id: repo.to_string(),
        weights: weights_in_dir(&snapshot)?,
        tokenizer: tokenizer_beside(&snapshot)?,
    })
}

/// Downloads the files `pick` chooses from a hub repository's listing into the hub cache (files
/// already there are not fetched again) and returns the snapshot folder that holds them.
pub(crate) fn download_snapshot(
    repo: &str,
    revision: Option<&str>,
    cache_dir: &Path,
    hub: &HubOptions,
    pick: impl FnOnce(&[String]) -> std::result::Result<Vec<String>, String>,
) -> Result<PathBuf> {
    let download_error = |message: String| EngineError::Download {
        repo: repo.to_string(),
        message,
    };
    let cache = hf_hub::Cache::new(cache_dir.to_path_buf());
    // HF_TOKEN wins over the token file `huggingface-cli login` writes, as in the Python client.
    let token = std::env::var("HF_TOKEN")
        .ok()
        .filter(|t| !t.is_empty())
        .or_else(|| cache.token());
    let mut builder = hf_hub::api::sync::ApiBuilder::from_cache(cache)
        .with_progress(hub.progress && hub.on_download.is_none())
        .with_token(token);
    if let Some(endpoint) = hub
        .endpoint
        .clone()
        .or_else(|| std::env::var("HF_ENDPOINT").ok())
    {
        builder = builder.with_endpoint(endpoint);
    }
    let api = builder.build().map_err(|e| download_error(e.to_string()))?;
    let api_repo = api.repo(api_repo_ref(repo, revision));
    let info = api_repo.info().map_err(|e| {
        download_error(format!(
            "{e} (is the network reachable, and for gated Gemma repos is HF_TOKEN set with the licence accepted?)"
        ))
    })?;
    let files: Vec<String> = info.siblings.into_iter().map(|s| s.rfilename).collect();
    let pick = pick(&files).map_err(download_error)?;
    let mut snapshot = None;
    for file in &pick {
        tracing::info!(repo, file, "downloading");
        let cached = hf_hub::Cache::new(cache_dir.to_path_buf())
            .repo(api_repo_ref(repo, revision))
            .get(file);
        let path = match (cached, &hub.on_download) {
            (Some(path), _) => Ok(path),
            (None, Some(listener)) => api_repo.download_with_progress(
                file,
                ListenerProgress {
                    listener: listener.clone(),
                    state: DownloadProgress {
                        file: file.clone(),
                        downloaded: 0,
                        total: 0,
                    },
                },
            ),
            (None, None) => api_repo.get(file),
        };
        let path = path.map_err(|e| download_error(format!("{file}: {e}")))?;
        // `a/b.json` lies two levels below the snapshot folder.
        snapshot = path
            .ancestors()
            .nth(Path::new(file).components().count())
            .map(Path::to_path_buf);
    }
    snapshot.ok_or_else(|| download_error("nothing was downloaded".to_string()))
}

fn api_repo_ref(repo: &str, revision: Option<&str>) -> hf_hub::Repo {
    match revision {
        Some(rev) => {
            hf_hub::Repo::with_revision(repo.to_string(), hf_hub::RepoType::Model, rev.to_string())
        }
        None => hf_hub::Repo::model(repo.to_string()),
    }
}

/// Which files of a hub repository make a usable text model. Prefers safetensors (full precision)
/// when present, otherwise the one language-model GGUF.
fn choose_hub_files(files: &[String]) -> Option<Vec<String>> {
    let has = |name: &str| files.iter().any(|f| f == name);
    let shards: Vec<&String> = files
        .iter()
        .filter(|f| f.ends_with(".safetensors"))
        .collect();
    let mut pick = Vec::new();
    if has("config.json") && !shards.is_empty() {
        pick.push("config.json".to_string());
        pick.extend(shards.into_iter().cloned());
    } else {
        let gguf = files
            .iter()
            .filter(|f| f.ends_with(".gguf") && !f.to_lowercase().contains("mmproj"))
            .min_by_key(|f| f.len())?;
        pick.push(gguf.clone());
    }
    if has("tokenizer.json") {
        pick.push("tokenizer.json".to_string());
    }
    Some(pick)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hub_ids_and_rejects_nonsense() {
        assert_eq!(
            ModelSpec::parse("google/gemma-3-4b-it-qat-q4_0-gguf").ok(),
            Some(ModelSpec::Hub {
                repo: "google/gemma-3-4b-it-qat-q4_0-gguf".into(),
                revision: None
            })
        );
        assert_eq!(
            ModelSpec::parse("google/gemma-3-1b-it@abc123").ok(),
            Some(ModelSpec::Hub {
                repo: "google/gemma-3-1b-it".into(),
                revision: Some("abc123".into())
            })
        );
        assert_eq!(ModelSpec::parse("").ok(), Some(ModelSpec::Default));
        let err = ModelSpec::parse("/no/such/model.gguf")
            .unwrap_err()
            .to_string();
        assert!(err.contains("neither an existing file"), "{err}");
    }

    #[test]
    fn picks_gguf_without_projector_or_safetensors_with_config() {
        let gguf_repo = vec![
            "mmproj-model-f16.gguf".to_string(),
            "gemma-3-4b-it-q4_0.gguf".to_string(),
            "README.md".to_string(),
        ];
        assert_eq!(
            choose_hub_files(&gguf_repo),
            Some(vec!["gemma-3-4b-it-q4_0.gguf".to_string()])
        );
        let st_repo = vec![
            "config.json".to_string(),
            "model-00001-of-00002.safetensors".to_string(),
            "model-00002-of-00002.safetensors".to_string(),
            "tokenizer.json".to_string(),
        ];
        assert_eq!(choose_hub_files(&st_repo).map(|p| p.len()), Some(4));
        assert_eq!(choose_hub_files(&["README.md".to_string()]), None);
    }

    #[test]
    fn resolves_a_prefilled_hub_cache_offline() -> Result<()> {
        let cache = tempfile::tempdir().map_err(|e| EngineError::io("tempdir", e))?;
        let repo_dir = cache
            .path()
            .join("models--google--gemma-3-4b-it-qat-q4_0-gguf");
        let snapshot = repo_dir.join("snapshots").join("0123abcd");
        std::fs::create_dir_all(&snapshot).map_err(|e| EngineError::io(&snapshot, e))?;
        std::fs::create_dir_all(repo_dir.join("refs"))
            .map_err(|e| EngineError::io(&repo_dir, e))?;
        std::fs::write(repo_dir.join("refs").join("main"), "0123abcd\n")
            .map_err(|e| EngineError::io(&repo_dir, e))?;
        for name in [
            "gemma-3-4b-it-q4_0.gguf",
            "mmproj-model-f16.gguf",
            "tokenizer.json",
        ] {
            std::fs::write(snapshot.join(name), b"x").map_err(|e| EngineError::io(&snapshot, e))?;
        }
        let hub = HubOptions {
            offline: true,
            cache_dir: Some(cache.path().to_path_buf()),
            ..HubOptions::default()
        };
        let spec = ModelSpec::Hub {
            repo: "google/gemma-3-4b-it-qat-q4_0-gguf".into(),
            revision: None,
        };
        let resolved = resolve(&spec, &hub)?;
        assert_eq!(
            resolved.weights,
            WeightFiles::Gguf(snapshot.join("gemma-3-4b-it-q4_0.gguf"))
        );
        assert_eq!(resolved.tokenizer, snapshot.join("tokenizer.json"));
        Ok(())
    }

    #[test]
    fn missing_hub_model_offline_is_a_clear_error() {
        let cache = tempfile::tempdir().expect("tempdir");
        let hub = HubOptions {
            offline: true,
            cache_dir: Some(cache.path().to_path_buf()),
            ..HubOptions::default()
        };
        let spec = ModelSpec::Hub {
            repo: "google/gemma-3-4b-it".into(),
            revision: None,
        };
        let err = resolve(&spec, &hub).unwrap_err().to_string();
        assert!(err.contains("not in the Hugging Face cache"), "{err}");
    }

    #[test]
    fn unreachable_hub_is_a_clear_error() {
        let cache = tempfile::tempdir().expect("tempdir");
        // Port 9 on loopback (discard) refuses at once: the network path fails fast and says why.
        let hub = HubOptions {
            endpoint: Some("http://127.0.0.1:9".into()),
            ..HubOptions::default()
        };
        let err = download_from_hub("google/gemma-3-4b-it", None, cache.path(), &hub)
            .unwrap_err()
            .to_string();
        assert!(err.contains("downloading google/gemma-3-4b-it"), "{err}");
        assert!(err.contains("network"), "{err}");
    }
}
