//! Removing history: one verdict, every verdict a filter matches, and what retention ages out.

use aegis_guard::Status;
use aegis_store::{HistoryFilter, Source};

use crate::common::{record, temp_store};

#[tokio::test]
async fn deleting_and_retention() {
    let t = temp_store().await;
    let s = &t.store;
    let old = record(s, "pesan lama", Source::Cli, None, &[]).await;
    let keep = record(s, "pesan baru", Source::Cli, None, &["spam"]).await;
    let gone = record(s, "hapus saya", Source::Cli, None, &[]).await;
    assert!(s.delete("ana", gone).await.expect("delete"));
    assert!(!s.delete("ana", gone).await.expect("delete twice"));
    let filter = HistoryFilter {
        text: Some("hapus".into()),
        ..Default::default()
    };
    assert_eq!(
        s.count(&filter).await.expect("count"),
        0,
        "its message left the search index too"
    );

    // Age one verdict by 40 days, as another program would see the database.
    {
        use sqlx::Connection;
        let mut conn = sqlx::AnyConnection::connect(&t.url())
            .await
            .expect("connect");
        sqlx::query("UPDATE verdicts SET created_at = created_at - CAST(40 AS BIGINT) * 86400000 WHERE id = $1")
            .bind(old)
            .execute(&mut conn)
            .await
            .expect("age");
    }
    assert_eq!(
        s.set_retention_days("ana", Some(30))
            .await
            .expect("retention"),
        1
    );
    assert_eq!(s.retention_days().await.expect("read"), Some(30));
    let left: Vec<i64> = s
        .list(&HistoryFilter::default(), None, 10)
        .await
        .expect("list")
        .rows
        .iter()
        .map(|r| r.verdict_id)
        .collect();
    assert_eq!(left, vec![keep]);
    assert_eq!(
        s.delete_matching(
            "ana",
            &HistoryFilter {
                status: Some(Status::Failed),
                ..Default::default()
            }
        )
        .await
        .expect("delete"),
        1
    );
    assert_eq!(s.count(&HistoryFilter::default()).await.expect("count"), 0);
    s.set_retention_days("ana", None).await.expect("off");
    assert_eq!(s.retention_days().await.expect("read"), None);
}
