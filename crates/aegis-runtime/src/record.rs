//! Check and record: the one way a single message becomes a verdict in history, for the HTTP
//! API, the desktop app and `aegis check` alike (imports record through `aegis-import`, which
//! also tracks the row in its batch).

use aegis_guard::GuardInput;
use aegis_store::{NewVerdict, Source, Store, StoreError};

use crate::worker::{Checked, Worker, WorkerError};

/// Who sent a message, as history records it.
#[derive(Debug, Clone, Copy)]
pub struct Submitter<'a> {
    pub source: Source,
    pub user_id: Option<&'a str>,
}

/// A verdict and what became of recording it. The verdict stands either way: whether a failed
/// write fails the request is the caller's policy (the API answers and logs; the app reports).
#[derive(Debug)]
pub struct Recorded {
    pub checked: Checked,
    /// The verdict's id in history, or why it could not be written.
    pub verdict_id: Result<i64, StoreError>,
}

/// Checks a message or a conversation's turn on the worker and records the verdict in `store`,
/// with the context it was read in.
pub async fn check_and_record(
    worker: &Worker,
    store: &Store,
    input: impl Into<GuardInput>,
    submitter: Submitter<'_>,
) -> Result<Recorded, WorkerError> {
    let input = input.into();
    let checked = worker.check(input.clone()).await?;
    let verdict_id = store
        .record(&NewVerdict {
            text: input.text(),
            source: submitter.source,
            user_id: submitter.user_id,
            import: None,
            verdict: &checked.verdict,
            templates: &checked.templates,
        })
        .await;
    Ok(Recorded {
        checked,
        verdict_id,
    })
}
