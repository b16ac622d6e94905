use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum AdaptError {
    #[error(transparent)]
    Engine(#[from] aegis_engine::EngineError),
    #[error("tensor computation failed: {0}")]
    Candle(#[from] candle_core::Error),
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(String),
}

pub type Result<T, E = AdaptError> = std::result::Result<T, E>;
