use std::time::Duration;

use aegis_store::{Store, StoreError, StoreOptions};
use sqlx::Connection;

#[tokio::test]
async fn a_locked_database_is_named_not_waited_on_forever() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("history.db");
    Store::open(&path).await.expect("create").close().await;
    // A fresh file whose schema we would have to write, locked by another program.
    let fresh = dir.path().join("fresh.db");
    std::fs::write(&fresh, b"").expect("touch");
    let mut holder = sqlx::SqliteConnection::connect(&format!("sqlite://{}", fresh.display()))
        .await
        .expect("connect");
    sqlx::query("BEGIN EXCLUSIVE")
        .execute(&mut holder)
        .await
        .expect("lock");
    let options = StoreOptions {
        busy_timeout: Duration::from_millis(200),
        ..StoreOptions::default()
    };
    let err = Store::open_with(&fresh, &options).await.unwrap_err();
    assert!(matches!(err, StoreError::Locked { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("fresh.db is locked by another program"),
        "{err}"
    );
    sqlx::query("ROLLBACK")
        .execute(&mut holder)
        .await
        .expect("unlock");
}

#[tokio::test]
async fn a_read_only_database_is_refused_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("history.db");
    Store::open(&path).await.expect("create").close().await;
    let mut perms = std::fs::metadata(&path).expect("meta").permissions();
    perms.set_readonly(true);
    std::fs::set_permissions(&path, perms).expect("chmod");
    let err = Store::open(&path).await.unwrap_err().to_string();
    assert!(err.contains("history.db is read-only"), "{err}");
}

#[tokio::test]
async fn a_corrupted_file_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("history.db");
    let garbage = b"this is not a database, it is a grocery list: beras, telur, minyak".repeat(100);
    std::fs::write(&path, &garbage).expect("write");
    let err = Store::open(&path).await.unwrap_err();
    assert!(matches!(err, StoreError::Corrupted { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("history.db is damaged or not a SQLite database"),
        "{err}"
    );
    assert_eq!(std::fs::read(&path).expect("read"), garbage, "never reset");
}

#[tokio::test]
async fn a_database_from_a_newer_version_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("history.db");
    Store::open(&path).await.expect("create").close().await;
    {
        let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
            .await
            .expect("connect");
        sqlx::query("INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) VALUES (9999, 'from the future', 1, x'00', 0)")
            .execute(&mut conn)
            .await
            .expect("future migration");
    }
    let err = Store::open(&path).await.unwrap_err();
    assert!(
        matches!(err, StoreError::NewerSchema { version: 9999, .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("written by a newer AEGIS"),
        "{err}"
    );
}

#[tokio::test]
async fn a_folder_in_place_of_the_file_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let err = Store::open(dir.path()).await.unwrap_err().to_string();
    assert!(err.contains("it is not a file"), "{err}");
}

#[tokio::test]
async fn programs_opening_a_new_database_at_once_migrate_it_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("history.db");
    let opens: Vec<_> = (0..6)
        .map(|_| {
            let path = path.clone();
            tokio::spawn(async move { Store::open(&path).await })
        })
        .collect();
    for open in opens {
        open.await.expect("task").expect("every opener succeeds");
    }
}
