//! A history database of its own for each test. With [`POSTGRES_ENV`] unset it is a SQLite file
//! in a temporary folder; with it set (`scripts/test.sh` starts a throwaway server with
//! `scripts/postgres.sh` and runs the history tests once more), a new, empty database on that
//! server, so tests running side by side never see each other's rows and the same tests hold
//! both engines to one behaviour.

use std::sync::atomic::{AtomicUsize, Ordering};

use aegis_store::Database;
use sqlx::Connection;

/// The PostgreSQL server to make the databases on, as a URL ending in a database name the
/// tests may connect to (e.g. `postgres://aegis@127.0.0.1:54321/aegis`).
pub const POSTGRES_ENV: &str = "AEGIS_TEST_POSTGRES_URL";

/// One test's database, kept until the value is dropped (the SQLite file's folder is removed
/// then; a PostgreSQL database stays with its throwaway server).
#[derive(Debug)]
pub struct ScratchDatabase {
    /// Holds the SQLite file (nothing, on PostgreSQL) until the test ends.
    _dir: tempfile::TempDir,
    pub database: Database,
}

impl ScratchDatabase {
    /// A new database on the engine the environment asks for.
    ///
    /// # Panics
    /// When the temporary folder or the PostgreSQL database cannot be made: a test cannot go on
    /// without its database.
    pub async fn new() -> Self {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let database = match postgres_server() {
            Some(server) => new_postgres_database(&server).await,
            None => Database::Sqlite(dir.path().join("history.db")),
        };
        Self {
            _dir: dir,
            database,
        }
    }

    /// [`ScratchDatabase::new`] for tests without a runtime (those driving the `aegis` binary):
    /// the database is made on a thread and runtime of its own.
    pub fn new_blocking() -> Self {
        std::thread::spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime")
                .block_on(Self::new())
        })
        .join()
        .expect("the scratch database is made")
    }

    /// What `--database`, `AEGIS_DB` or the console's setting take for it: the SQLite file's path
    /// or the PostgreSQL URL, password and all (unlike `Database`'s display).
    pub fn arg(&self) -> String {
        match &self.database {
            Database::Sqlite(path) => path.display().to_string(),
            Database::Postgres(url) => url.clone(),
        }
    }

    /// The URL another program (sqlx's Any driver, a raw connection) would connect to.
    pub fn url(&self) -> String {
        match &self.database {
            Database::Sqlite(path) => format!("sqlite://{}", path.display()),
            Database::Postgres(url) => url.clone(),
        }
    }
}

/// The server [`POSTGRES_ENV`] names, if any.
fn postgres_server() -> Option<String> {
    std::env::var(POSTGRES_ENV)
        .ok()
        .filter(|url| !url.trim().is_empty())
}

/// A new, empty database on `server`, named after this process and a counter so that test
/// binaries running at once and tests within one never collide.
async fn new_postgres_database(server: &str) -> Database {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    sqlx::any::install_default_drivers();
    let name = format!(
        "aegis_test_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let mut admin = sqlx::AnyConnection::connect(server)
        .await
        .unwrap_or_else(|e| panic!("the test PostgreSQL server ({POSTGRES_ENV}): {e}"));
    // A leftover of an earlier process that had this id.
    sqlx::query(&format!("DROP DATABASE IF EXISTS {name}"))
        .execute(&mut admin)
        .await
        .expect("drop a leftover database");
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut admin)
        .await
        .expect("create a test database");
    let (base, _) = server
        .rsplit_once('/')
        .expect("a server URL ends in a database name");
    Database::Postgres(format!("{base}/{name}"))
}
