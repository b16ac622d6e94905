use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum HeadError {
    #[error("cannot read head {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write head {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a valid head file: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("the head expects {expected} features, got {got}")]
    FeatureWidth { expected: usize, got: usize },
    #[error("reading {reading:?}: {message}")]
    ReadingInput { reading: String, message: String },
    #[error(
        "too few labelled examples to train and cross-validate: {positives} positive and {negatives} negative; each class needs at least {needed}"
    )]
    TooFewExamples {
        positives: usize,
        negatives: usize,
        needed: usize,
    },
    #[error("the examples' features differ in width or are not finite numbers")]
    BadFeatures,
    #[error("fitting the logistic regression failed: {0}")]
    Fit(String),
}

pub type Result<T, E = HeadError> = std::result::Result<T, E>;
