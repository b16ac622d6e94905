//! The console's settings: a JSON file in the data folder, written atomically. A missing file
//! means defaults; a broken one is kept aside (never overwritten silently) and defaults are used.

use std::path::Path;

use aegis_engine::ModelRequest;
use aegis_guard::{Language, RejectionMode};
use aegis_runtime::HeadsRead;
use serde::{Deserialize, Serialize};

use crate::error::ConsoleError;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(default)]
pub struct Settings {
    /// "default", a local .gguf file or model folder, or a Hugging Face repo id.
    pub model: String,
    /// auto, cpu, cuda, cuda:N.
    pub device: String,
    /// auto (f32 on CPU, bf16 on GPU), f32, bf16 or quantized.
    pub weights: String,
    /// A shared model server (llama.cpp's `llama-server` or vLLM) to run the guard's model on
    /// instead of `model`, e.g. http://gpu-box:8000; empty runs the model here.
    pub backend: String,
    /// What learned heads read: "embeddinggemma" (EmbeddingGemma-300M, the shipped heads in
    /// `prompt_guard/heads/`), "decoder" (the model's hidden states, heads in
    /// `prompt_guard/heads/decoder/`; no second download), a sentence-transformers folder or a
    /// hub id. Heads trained for another encoder are refused and their prompts decide.
    pub encoder: String,
    /// A shared `/v1/embeddings` server (llama.cpp, vLLM, Text Embeddings Inference) serving
    /// EmbeddingGemma for the heads, e.g. http://gpu-box:8081; empty runs the encoder here.
    pub encoder_server: String,
    /// The validator templates; the shipped `prompt_guard/` when empty.
    pub prompts_dir: String,
    /// Where history is kept: empty for `history.db` in the data folder, a SQLite file's path,
    /// or a `postgres://` URL a team shares. Read when the console starts; `AEGIS_DATABASE_URL`
    /// wins over it.
    pub database: String,
    /// Have the model write each rejection message (slower); else the templates' own.
    pub generate_rejection: bool,
    pub rejection_language: RejectionLanguage,
    /// Passed verdicts this close to a threshold join the review queue.
    pub review_margin: f64,
    pub reviewer: String,
    pub http: HttpSettings,
}

/// The language rejection messages are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum RejectionLanguage {
    /// The message's own language, detected.
    #[default]
    Auto,
    Id,
    En,
}

impl RejectionLanguage {
    /// The language every rejection is written in; `None` follows each message.
    pub fn fixed(self) -> Option<Language> {
        match self {
            Self::Auto => None,
            Self::Id => Some(Language::Indonesian),
            Self::En => Some(Language::English),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(default)]
pub struct HttpSettings {
    pub enabled: bool,
    pub host: String,
    pub port: u16,
    /// Bearer token; required when the host is not loopback.
    pub token: String,
    /// An OpenAI-compatible chat server (llama.cpp, vLLM, Ollama, a hosted API) the Playground
    /// talks to through the guard, and the endpoint's `/v1/chat/completions` relays to; empty for
    /// none. Its key, if it needs one, comes from `AEGIS_UPSTREAM_KEY`, never from this file.
    pub upstream: String,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            model: "default".into(),
            device: "auto".into(),
            weights: "auto".into(),
            backend: String::new(),
            encoder: aegis_runtime::DEFAULT_HEADS_READ.into(),
            encoder_server: String::new(),
            prompts_dir: String::new(),
            database: String::new(),
            generate_rejection: false,
            rejection_language: RejectionLanguage::Auto,
            review_margin: 0.15,
            reviewer: "reviewer".into(),
            http: HttpSettings::default(),
        }
    }
}

impl HttpSettings {
    /// The chat server to relay to, if one is set; an unusable URL is refused.
    pub fn upstream(&self) -> Result<Option<aegis_upstream::Upstream>, ConsoleError> {
        let url = self.upstream.trim();
        if url.is_empty() {
            return Ok(None);
        }
        let key = std::env::var("AEGIS_UPSTREAM_KEY").ok();
        aegis_upstream::Upstream::new(url, key)
            .map(Some)
            .map_err(|e| ConsoleError::Invalid(format!("chat upstream: {e}")))
    }
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            host: "127.0.0.1".into(),
            port: 8000,
            token: String::new(),
            upstream: String::new(),
        }
    }
}

impl Settings {
    pub fn load(path: &Path) -> Self {
        let Ok(text) = std::fs::read_to_string(path) else {
            return Self::default();
        };
        match serde_json::from_str(&text) {
            Ok(settings) => settings,
            Err(e) => {
                let aside = path.with_extension("json.broken");
                tracing::warn!(error = %e, aside = %aside.display(), "settings file unreadable; using defaults and keeping it aside");
                let _ = std::fs::rename(path, aside);
                Self::default()
            }
        }
    }

    pub fn validate(&self) -> Result<(), ConsoleError> {
        let invalid = |m: String| Err(ConsoleError::Invalid(m));
        if self.model.trim().is_empty() {
            return invalid(
                "the model must not be empty: use \"default\", a path or a repo id".into(),
            );
        }
        self.model_request(&self.model)?;
        self.heads_read()?;
        if let Some(url) = self.backend_url() {
            aegis_remote::check_server_url(url).map_err(ConsoleError::Invalid)?;
        }
        if !(0.0..=0.5).contains(&self.review_margin) {
            return invalid("the review margin must be between 0 and 0.5".into());
        }
        if self.reviewer.trim().is_empty() {
            return invalid("the reviewer name must not be empty".into());
        }
        self.http.upstream()?;
        if !self.database.trim().is_empty() {
            self.database
                .parse::<aegis_store::Database>()
                .map_err(|e| ConsoleError::Invalid(format!("history database: {e}")))?;
        }
        let prompts = self.prompts_dir.trim();
        if !prompts.is_empty() {
            // Refused before it is saved: a typo must not leave the guard without templates.
            aegis_guard::find_prompts_dir(Some(Path::new(prompts)), None)?;
        }
        Ok(())
    }

    /// The history database the console opens: `AEGIS_DATABASE_URL`, else this setting, else
    /// `history.db` in `data_dir`.
    pub fn history_database(&self, data_dir: &Path) -> Result<aegis_store::Database, ConsoleError> {
        let given = std::env::var("AEGIS_DATABASE_URL")
            .ok()
            .filter(|url| !url.trim().is_empty())
            .unwrap_or_else(|| self.database.clone());
        if given.trim().is_empty() {
            return Ok(aegis_store::Database::Sqlite(data_dir.join("history.db")));
        }
        given
            .parse()
            .map_err(|e| ConsoleError::Invalid(format!("history database: {e}")))
    }

    /// What the heads read, as the guard's one setup takes it.
    pub fn heads_read(&self) -> Result<HeadsRead, ConsoleError> {
        HeadsRead::parse(&self.encoder)
            .and_then(|read| read.served_by(Some(&self.encoder_server)))
            .map_err(|e| ConsoleError::Invalid(e.to_string()))
    }

    pub fn rejection_mode(&self) -> RejectionMode {
        RejectionMode::chosen(self.generate_rejection)
    }

    /// The model server to use, if one is set.
    pub fn backend_url(&self) -> Option<&str> {
        Some(self.backend.trim()).filter(|url| !url.is_empty())
    }

    /// The engine's request for `model` on these settings' device and weights.
    pub fn model_request(&self, model: &str) -> Result<ModelRequest, ConsoleError> {
        ModelRequest::new(model)
            .with_device_and_weights(&self.device, &self.weights)
            .map_err(|e| ConsoleError::Invalid(e.to_string()))
    }

    pub fn save(&self, path: &Path) -> Result<(), ConsoleError> {
        let text =
            serde_json::to_string_pretty(self).map_err(|e| ConsoleError::Invalid(e.to_string()))?;
        write_atomically(path, text.as_bytes())
    }
}

/// Writes durably and atomically (see `aegis_files`), as a console error naming the file.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), ConsoleError> {
    aegis_files::write_atomically(path, bytes).map_err(|e| ConsoleError::Io {
        path: e.path,
        source: e.source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_fills_missing_fields_and_keeps_a_broken_file_aside() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("settings.json");
        assert_eq!(Settings::load(&path), Settings::default());
        let mut s = Settings::default();
        s.http.port = 9001;
        s.save(&path).expect("save");
        assert_eq!(Settings::load(&path), s);
        std::fs::write(&path, r#"{"model":"x.gguf"}"#).expect("write");
        let partial = Settings::load(&path);
        assert_eq!(partial.model, "x.gguf");
        assert_eq!(partial.http.port, 8000);
        std::fs::write(&path, "{not json").expect("write");
        assert_eq!(Settings::load(&path), Settings::default());
        assert!(dir.path().join("settings.json.broken").exists());
    }

    #[test]
    fn refuses_bad_values() {
        // A language the rejections are not written in cannot even be read.
        let french = serde_json::from_str::<Settings>(r#"{"rejection_language": "fr"}"#);
        assert!(french.is_err());
        let wide = Settings {
            review_margin: 0.9,
            ..Settings::default()
        };
        assert!(wide.validate().is_err());
        let nowhere = Settings {
            prompts_dir: "/no/such/templates".into(),
            ..Settings::default()
        };
        let refused = nowhere
            .validate()
            .expect_err("a missing folder")
            .to_string();
        assert!(refused.contains("/no/such/templates"), "{refused}");
        for bad in ["gpu-box:8000", "ftp://gpu-box", "http://"] {
            let server = Settings {
                backend: bad.into(),
                ..Settings::default()
            };
            assert!(server.validate().is_err(), "{bad}");
        }
        let server = Settings {
            backend: " http://127.0.0.1:8080 ".into(),
            ..Settings::default()
        };
        assert_eq!(server.validate().ok(), Some(()));
        let no_encoder = Settings {
            encoder: " ".into(),
            ..Settings::default()
        };
        assert!(no_encoder.validate().is_err());
        let decoder = Settings {
            encoder: "decoder".into(),
            ..Settings::default()
        };
        assert_eq!(decoder.heads_read().ok(), Some(HeadsRead::Decoder));
        assert_eq!(server.backend_url(), Some("http://127.0.0.1:8080"));
    }
}
