//! Opening the database: create or migrate it, and refuse clearly what cannot be opened safely.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Mutex;
use std::time::Duration;

use sqlx::migrate::{MigrateError, Migrator};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use crate::error::{classify, Result, StoreError};

/// The migrations in the top-level `migrations/`, compiled into the binary.
static MIGRATOR: Migrator = sqlx::migrate!("../../migrations");

#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// How long a write waits for another program's lock before giving up.
    pub busy_timeout: Duration,
    pub readers: u32,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            // Generous: on a loaded machine another program's commit plus its WAL checkpoint
            // (an fsync) can take seconds; failing a verdict's recording for that would be worse.
            busy_timeout: Duration::from_secs(15),
            readers: 4,
        }
    }
}

#[derive(Debug)]
pub struct Store {
    pub(crate) path: PathBuf,
    /// The one writer: SQLite serialises writers anyway, and queueing here is fairer than retrying.
    pub(crate) writer: SqlitePool,
    pub(crate) reader: SqlitePool,
    /// Template versions already in the database, so recording skips re-inserting them.
    pub(crate) known_templates: Mutex<HashSet<(String, String)>>,
}

impl Store {
    pub async fn open(path: &Path) -> Result<Self> {
        Self::open_with(path, &StoreOptions::default()).await
    }

    pub async fn open_with(path: &Path, options: &StoreOptions) -> Result<Self> {
        let open_err = |message: String| StoreError::Open {
            path: path.to_path_buf(),
            message,
        };
        match std::fs::metadata(path) {
            // Checked up front: SQLite would only notice at the first write, and an administrator
            // opening it would not notice at all.
            Ok(meta) if meta.permissions().readonly() => {
                return Err(StoreError::ReadOnly {
                    path: path.to_path_buf(),
                })
            }
            Ok(meta) if !meta.is_file() => return Err(open_err("it is not a file".into())),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir).map_err(|e| {
                        open_err(format!("cannot create its folder {}: {e}", dir.display()))
                    })?;
                }
            }
            Err(e) => return Err(open_err(e.to_string())),
        }
        let connect = SqliteConnectOptions::from_str("sqlite://")
            .map_err(|e| open_err(e.to_string()))?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // In WAL mode NORMAL loses no committed row when the process dies (only on power
            // loss), and spares an fsync per verdict.
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(options.busy_timeout);
        // Two programs opening a new database at once would race: both switching it to WAL (which
        // can fail at once, without waiting) and both creating the tables (sqlx's SQLite migrator
        // takes no lock). A lock file beside the database serialises opening until migrated.
        let lock_path = path.with_extension("db-migrate-lock");
        // Waiting for the lock blocks, so it waits off the async runtime's threads.
        let locking = lock_path.clone();
        let lock = tokio::task::spawn_blocking(move || {
            std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&locking)
                .and_then(|file| file.lock().map(|()| file))
        })
        .await
        .map_err(|e| open_err(e.to_string()))?
        .map_err(|e| open_err(format!("cannot lock {}: {e}", lock_path.display())))?;
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(connect.clone())
            .await
            .map_err(|e| classify(path, e))?;
        // A damaged file can still "connect"; reading the schema is what finds out.
        sqlx::query("SELECT count(*) FROM sqlite_master")
            .execute(&writer)
            .await
            .map_err(|e| classify(path, e))?;
        let migrated = MIGRATOR.run(&writer).await;
        drop(lock);
        migrated.map_err(|e| match e {
            MigrateError::VersionMissing(version) => StoreError::NewerSchema {
                path: path.to_path_buf(),
                version,
            },
            MigrateError::Execute(e) => classify(path, e),
            other => open_err(format!("migrating the schema failed: {other}")),
        })?;
        let reader = SqlitePoolOptions::new()
            .max_connections(options.readers.max(1))
            .connect_with(connect.read_only(true))
            .await
            .map_err(|e| classify(path, e))?;
        let store = Self {
            path: path.to_path_buf(),
            writer,
            reader,
            known_templates: Mutex::new(HashSet::new()),
        };
        if let Some(days) = store.retention_days().await? {
            let dropped = store.apply_retention(days).await?;
            if dropped > 0 {
                tracing::info!(dropped, days, "history retention applied");
            }
        }
        Ok(store)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn sql(&self, error: sqlx::Error) -> StoreError {
        classify(&self.path, error)
    }

    /// Waits for pending work and closes the connections.
    pub async fn close(self) {
        self.writer.close().await;
        self.reader.close().await;
    }
}
