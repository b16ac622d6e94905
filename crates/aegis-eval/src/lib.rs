//! The evaluation workbench: labelled datasets in, the guard's quality out. Loads JSONL (the
//! evaluation schema) or CSV, scores every row with a guard, and computes per validator and per
//! language precision, recall, F1, ROC and PR AUC, the best-F1 threshold and the confusion
//! matrix; renders JSON and a self-contained HTML report; compares two runs message by message.
//! Metrics are computed from stored scores only, so moving a threshold never runs the model.

mod compare;
mod dataset;
mod error;
mod html;
mod metrics;
mod report;
mod run;
mod threshold;

pub use compare::{compare, Comparison, Flip, MetricDelta};
pub use dataset::{Dataset, DatasetRow, Sample};
pub use error::{EvalError, Result};
pub use html::render as render_html;
pub use metrics::{
    metric_text, BestThreshold, Confusion, Curves, Histogram, Metrics, METRIC_COLUMNS,
};
pub use report::{
    BenignRate, DatasetInfo, EvalReport, Mistake, ModelInfo, RowError, RunInfo, RunTemplate,
    ScoredRow, ValidatorReport, ValidatorSummary,
};
pub use run::{run_info, score_rows};
pub use threshold::{choose_threshold_for_budget, BudgetChoice};
