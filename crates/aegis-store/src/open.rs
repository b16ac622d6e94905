//! Opening the database: create or migrate it, and refuse clearly what cannot be opened safely.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use sqlx::any::AnyPoolOptions;
use sqlx::migrate::{MigrateError, Migrator};
use sqlx::AnyPool;
use sqlx::{Connection, Executor};

use crate::database::{classify, sqlite_url, Database, Engine};
use crate::error::{Result, StoreError};

/// The migrations in the top-level `migrations/`, one folder per engine, compiled into the
/// binary. A change to the schema is a file in each, under the same number.
static SQLITE_MIGRATOR: Migrator = sqlx::migrate!("../../migrations/sqlite");
static POSTGRES_MIGRATOR: Migrator = sqlx::migrate!("../../migrations/postgres");

#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// How long a write waits for another program's lock before giving up (SQLite).
    pub busy_timeout: Duration,
    /// Connections that read (SQLite: beside its one writer; PostgreSQL: all of them).
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
    pub(crate) database: Database,
    /// SQLite: the one writer (SQLite serialises writers anyway, and queueing here is fairer than
    /// retrying). PostgreSQL: the same pool as `reader`.
    pub(crate) writer: AnyPool,
    pub(crate) reader: AnyPool,
    /// Template versions already in the database, so recording skips re-inserting them.
    pub(crate) known_templates: Mutex<HashSet<(String, String)>>,
}

impl Store {
    /// A SQLite file's store.
    pub async fn open(path: &Path) -> Result<Self> {
        Self::connect(&Database::Sqlite(path.to_path_buf())).await
    }

    pub async fn open_with(path: &Path, options: &StoreOptions) -> Result<Self> {
        Self::connect_with(&Database::Sqlite(path.to_path_buf()), options).await
    }

    pub async fn connect(database: &Database) -> Result<Self> {
        Self::connect_with(database, &StoreOptions::default()).await
    }

    pub async fn connect_with(database: &Database, options: &StoreOptions) -> Result<Self> {
        sqlx::any::install_default_drivers();
        let (writer, reader) = match database {
            Database::Sqlite(path) => open_sqlite(database, path, options).await?,
            Database::Postgres(url) => open_postgres(database, url, options).await?,
        };
        let store = Self {
            database: database.clone(),
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

    /// Where the history is kept.
    pub fn database(&self) -> &Database {
        &self.database
    }

    /// The dialect its queries are written in, where the two differ.
    pub(crate) fn engine(&self) -> Engine {
        self.database.engine()
    }

    pub(crate) fn sql(&self, error: sqlx::Error) -> StoreError {
        classify(&self.database, error)
    }

    /// A transaction that reads and then writes what it read decides, as claims and reviews do.
    /// On SQLite it takes the write lock at once (`BEGIN IMMEDIATE`): a deferred one that read
    /// first could not upgrade after another program (a second console on the same file)
    /// wrote, and would fail rather than wait.
    pub(crate) async fn begin_deciding(&self) -> Result<sqlx::Transaction<'static, sqlx::Any>> {
        let begun = match self.engine() {
            Engine::Sqlite => self.writer.begin_with("BEGIN IMMEDIATE").await,
            Engine::Postgres => self.writer.begin().await,
        };
        begun.map_err(|e| self.sql(e))
    }

    /// Waits for pending work and closes the connections.
    pub async fn close(self) {
        self.writer.close().await;
        self.reader.close().await;
    }
}

fn migration_error(database: &Database, error: MigrateError) -> StoreError {
    match error {
        MigrateError::VersionMissing(version) => StoreError::NewerSchema {
            database: database.to_string(),
            version,
        },
        MigrateError::Execute(e) => classify(database, e),
        other => StoreError::Open {
            database: database.to_string(),
            message: format!("migrating the schema failed: {other}"),
        },
    }
}

async fn open_sqlite(
    database: &Database,
    path: &Path,
    options: &StoreOptions,
) -> Result<(AnyPool, AnyPool)> {
    let open_err = |message: String| StoreError::Open {
        database: database.to_string(),
        message,
    };
    match std::fs::metadata(path) {
        // Checked up front: SQLite would only notice at the first write, and an administrator
        // opening it would not notice at all.
        Ok(meta) if meta.permissions().readonly() => {
            return Err(StoreError::ReadOnly {
                database: database.to_string(),
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
    // Every connection waits for another program's lock rather than failing at once, and keeps
    // foreign keys (SQLite forgets both per connection). In WAL mode NORMAL loses no committed
    // row when the process dies (only on power loss), and spares an fsync per verdict.
    let pragmas: std::sync::Arc<str> = format!(
        "PRAGMA busy_timeout = {}; PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL;",
        options.busy_timeout.as_millis()
    )
    .into();
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
    // One connection first, so a damaged or locked file is named: a pool retries a connection
    // that fails until it times out, and would only say that. A damaged file can still
    // "connect"; reading the schema is what finds out.
    let mut probe = sqlx::AnyConnection::connect(&sqlite_url(path, "rwc"))
        .await
        .map_err(|e| classify(database, e))?;
    probe
        .execute(&*format!(
            "{pragmas} SELECT count(*) FROM sqlite_master; PRAGMA journal_mode = WAL;"
        ))
        .await
        .map_err(|e| classify(database, e))?;
    probe.close().await.map_err(|e| classify(database, e))?;
    let writer = AnyPoolOptions::new()
        .max_connections(1)
        .after_connect({
            let pragmas = pragmas.clone();
            move |conn, _| {
                let pragmas = pragmas.clone();
                Box::pin(async move { conn.execute(&*pragmas).await.map(|_| ()) })
            }
        })
        .connect(&sqlite_url(path, "rwc"))
        .await
        .map_err(|e| classify(database, e))?;
    let migrated = SQLITE_MIGRATOR.run(&writer).await;
    drop(lock);
    migrated.map_err(|e| migration_error(database, e))?;
    let reader = AnyPoolOptions::new()
        .max_connections(options.readers.max(1))
        .after_connect(move |conn, _| {
            let pragmas = pragmas.clone();
            Box::pin(async move { conn.execute(&*pragmas).await.map(|_| ()) })
        })
        .connect(&sqlite_url(path, "ro"))
        .await
        .map_err(|e| classify(database, e))?;
    Ok((writer, reader))
}

async fn open_postgres(
    database: &Database,
    url: &str,
    options: &StoreOptions,
) -> Result<(AnyPool, AnyPool)> {
    let pool = AnyPoolOptions::new()
        // Readers and writers share the pool: PostgreSQL runs writers side by side.
        .max_connections(options.readers.max(1) + 1)
        .acquire_timeout(options.busy_timeout)
        .connect(url)
        .await
        .map_err(|e| StoreError::Open {
            database: database.to_string(),
            message: format!("cannot connect: {e}"),
        })?;
    // sqlx's PostgreSQL migrator holds an advisory lock: consoles starting together take turns.
    POSTGRES_MIGRATOR
        .run(&pool)
        .await
        .map_err(|e| migration_error(database, e))?;
    Ok((pool.clone(), pool))
}
