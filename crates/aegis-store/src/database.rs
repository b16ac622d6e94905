//! Which database a store keeps its history in: a SQLite file (the embedded default, one
//! console's own) or a PostgreSQL server a team shares.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use crate::error::StoreError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Database {
    /// A SQLite file, created with its folder when missing.
    Sqlite(PathBuf),
    /// A `postgres://` or `postgresql://` URL.
    Postgres(String),
}

/// The SQL dialect a query is written for, where one text cannot serve both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Engine {
    Sqlite,
    Postgres,
}

impl Database {
    pub(crate) fn engine(&self) -> Engine {
        match self {
            Self::Sqlite(_) => Engine::Sqlite,
            Self::Postgres(_) => Engine::Postgres,
        }
    }
}

/// A URL names PostgreSQL (`postgres://`, `postgresql://`) or a SQLite file (`sqlite://PATH`);
/// anything else is a SQLite file's path.
impl FromStr for Database {
    type Err = StoreError;

    fn from_str(s: &str) -> Result<Self, StoreError> {
        let s = s.trim();
        if s.is_empty() {
            return Err(StoreError::Invalid(
                "no database given: a SQLite file's path or a postgres:// URL".into(),
            ));
        }
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            return Ok(Self::Postgres(s.to_string()));
        }
        if let Some(path) = s.strip_prefix("sqlite://") {
            return Ok(Self::Sqlite(PathBuf::from(path)));
        }
        if let Some((scheme, _)) = s.split_once("://") {
            return Err(StoreError::Invalid(format!(
                "{scheme}:// databases are not supported: use a SQLite file's path or a postgres:// URL"
            )));
        }
        Ok(Self::Sqlite(PathBuf::from(s)))
    }
}

impl From<PathBuf> for Database {
    fn from(path: PathBuf) -> Self {
        Self::Sqlite(path)
    }
}

/// The path, or the URL with its password hidden: this is what errors and logs name.
impl fmt::Display for Database {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Sqlite(path) => write!(f, "{}", path.display()),
            Self::Postgres(url) => f.write_str(&without_password(url)),
        }
    }
}

/// `postgres://user:secret@host/db` as `postgres://user:***@host/db`.
fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return url.to_string();
    };
    match rest[..at].split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***{}", &rest[at..]),
        None => url.to_string(),
    }
}

/// SQLite's primary result codes that name a state of the file rather than a bug. PostgreSQL's
/// codes are SQLSTATEs, some of them digits too, so they are never read as SQLite's.
pub(crate) fn classify(database: &Database, error: sqlx::Error) -> StoreError {
    let name = database.to_string();
    if let (Database::Sqlite(_), sqlx::Error::Database(db)) = (database, &error) {
        let primary = db
            .code()
            .and_then(|c| c.parse::<i64>().ok())
            .map(|c| c & 0xff);
        match primary {
            Some(5) | Some(6) => return StoreError::Locked { database: name },
            Some(8) => return StoreError::ReadOnly { database: name },
            Some(11) | Some(26) => {
                return StoreError::Corrupted {
                    database: name,
                    message: db.message().to_string(),
                }
            }
            _ => {}
        }
    }
    StoreError::Sql {
        database: name,
        source: error,
    }
}

/// A SQLite file as the URL sqlx's Any driver reads, every byte outside a plain path's
/// characters escaped (sqlx decodes them, so `?`, `#`, `%` and spaces in a name survive).
pub(crate) fn sqlite_url(path: &std::path::Path, mode: &str) -> String {
    let mut url = String::from("sqlite://");
    for byte in path.as_os_str().as_encoded_bytes() {
        match byte {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'/' | b'.' | b'_' | b'-' | b'~' => {
                url.push(char::from(*byte))
            }
            other => url.push_str(&format!("%{other:02X}")),
        }
    }
    url.push_str("?mode=");
    url.push_str(mode);
    url
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_postgres_and_anything_else_is_a_sqlite_path() {
        assert_eq!(
            "postgres://aegis@127.0.0.1:5432/aegis"
                .parse::<Database>()
                .unwrap(),
            Database::Postgres("postgres://aegis@127.0.0.1:5432/aegis".into())
        );
        assert!(matches!(
            "postgresql://h/db".parse::<Database>().unwrap(),
            Database::Postgres(_)
        ));
        assert_eq!(
            "sqlite:///tmp/h.db".parse::<Database>().unwrap(),
            Database::Sqlite("/tmp/h.db".into())
        );
        assert_eq!(
            "history.db".parse::<Database>().unwrap(),
            Database::Sqlite("history.db".into())
        );
        assert!("mysql://h/db".parse::<Database>().is_err());
        assert!("  ".parse::<Database>().is_err());
    }

    #[test]
    fn a_password_is_never_shown() {
        let db: Database = "postgres://team:s3cret@db.local:5432/aegis?sslmode=require"
            .parse()
            .unwrap();
        assert_eq!(
            db.to_string(),
            "postgres://team:***@db.local:5432/aegis?sslmode=require"
        );
        assert_eq!(
            Database::Postgres("postgres://team@db/aegis".into()).to_string(),
            "postgres://team@db/aegis"
        );
    }

    #[test]
    fn odd_file_names_survive_the_url() {
        assert_eq!(
            sqlite_url(std::path::Path::new("/tmp/a b?#%.db"), "ro"),
            "sqlite:///tmp/a%20b%3F%23%25.db?mode=ro"
        );
    }
}
