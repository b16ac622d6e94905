//! What applying a version leaves behind, whether the version is a validator's head or the
//! encoder's adapter: both are written, recorded and reverted the same way.

use std::path::PathBuf;

/// Where a head (or adapter) was written and the version it became.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    pub validator: String,
    pub path: PathBuf,
    pub version: i64,
    /// The threshold written into the template, when the head carries one and it changed.
    pub threshold: Option<f64>,
    /// Readings of the head it replaced, kept because the new head came without any
    /// ([`crate::apply_head`]).
    pub kept_readings: Vec<String>,
}
