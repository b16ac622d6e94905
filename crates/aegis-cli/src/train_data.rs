//! Training rows from the history database: reviewed verdicts and taught examples (files, and
//! how rows are shaped for one validator, are `aegis_teach`'s).

use aegis_guard::LabelledMessage;
use anyhow::Result;

use crate::history_cmd::DbArgs;

pub fn reviewed_messages(db: &DbArgs) -> Result<Vec<LabelledMessage>> {
    let runtime = tokio::runtime::Runtime::new()?;
    let examples = runtime.block_on(async {
        let store = db.open().await?;
        let examples = store.reviewed_examples(&Default::default()).await;
        store.close().await;
        anyhow::Ok(examples?)
    })?;
    Ok(examples.into_iter().map(|e| e.into_labelled()).collect())
}

/// The taught examples in history as labelled rows (each labels its own validator only).
pub fn taught_messages(db: &DbArgs) -> Result<Vec<LabelledMessage>> {
    let runtime = tokio::runtime::Runtime::new()?;
    let examples = runtime.block_on(async {
        let store = db.open().await?;
        let examples = store.examples(None).await;
        store.close().await;
        anyhow::Ok(examples?)
    })?;
    Ok(aegis_teach::taught_rows(examples))
}
