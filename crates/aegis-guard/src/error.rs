use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    #[error("{path}: {problem}")]
    Template {
        path: PathBuf,
        problem: String,
        /// The 1-based line of the file the problem is on, when it has one.
        line: Option<u32>,
    },
    #[error("cannot read the templates folder {path}: {source}")]
    TemplatesDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "no validator templates folder: looked in {}; {hint}",
        list_paths(looked)
    )]
    PromptsNotFound { looked: Vec<PathBuf>, hint: String },
    #[error("no usable validator templates in {0}")]
    NoValidators(PathBuf),
    #[error("the text is empty: give a message to check")]
    EmptyText,
    /// A conversation the guard cannot read; `index` is the turn at fault, from 0.
    #[error("{}{problem}", turn_prefix(*index))]
    BadTurn {
        index: Option<usize>,
        problem: String,
    },
    #[error(
        "the text is too long: it is {message_tokens} tokens; with a validator's template around it the prompt is {prompt_tokens} tokens, over the model's context of {limit} tokens"
    )]
    TooLong {
        message_tokens: usize,
        prompt_tokens: usize,
        limit: usize,
    },
    #[error("{path}: head not used, the prompt's score decides: {reason}")]
    HeadRefused { path: PathBuf, reason: String },
    #[error("the {key} head could not score this message: {message}")]
    HeadFailed { key: String, message: String },
    #[error("training the {key} head failed: {message}")]
    Training { key: String, message: String },
    #[error(transparent)]
    Engine(#[from] aegis_engine::EngineError),
}

pub type Result<T, E = GuardError> = std::result::Result<T, E>;

fn turn_prefix(index: Option<usize>) -> String {
    index.map(|i| format!("turn {i}: ")).unwrap_or_default()
}

fn list_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
