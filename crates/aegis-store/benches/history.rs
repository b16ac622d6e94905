//! History at scale: fills 100,000 verdicts, then times recording (one verdict at a time, and an
//! import's groups of 64), a filtered page, a full-text search (beside a LIKE scan of the same database as the baseline) and an export.
//!
//! Run: cargo bench -p aegis-store --bench history [-- ROWS]
//! On PostgreSQL: AEGIS_TEST_POSTGRES_URL=$(scripts/postgres.sh start DIR) cargo bench … (a new
//! database on that server, as the tests make one).

use std::time::Instant;

use aegis_guard::Verdict;
use aegis_store::{ExportFormat, HistoryFilter, NewVerdict, ScoreRange, Source};
use sqlx::Connection;

// The tests' fixtures: the same verdict and templates shapes, at scale.
#[allow(dead_code)]
#[path = "../tests/common.rs"]
mod common;

const WORDS: [&str; 16] = [
    "halo", "saldo", "promo", "gratis", "saham", "cuan", "bodoh", "kirim", "pulsa", "hadiah",
    "transfer", "akun", "login", "murah", "kabar", "pagi",
];

/// Scores spread over [0, 1) by row, so score filters select a realistic share.
fn verdict(i: u64) -> Verdict {
    common::verdict_scored(std::array::from_fn(|k| {
        ((i.wrapping_mul(2_654_435_761).wrapping_add(k as u64 * 97)) % 1000) as f32 / 1000.0
    }))
}

fn text(i: u64) -> String {
    (0..12)
        .map(|w| WORDS[((i * 7 + w * 13 + i / 3) % WORDS.len() as u64) as usize])
        .collect::<Vec<_>>()
        .join(" ")
        + &format!(" nomor {i}")
}

fn millis(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1e3
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rows: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(100_000);
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let temp = common::temp_store().await;
        let store = &temp.store;
        println!("database: {}", temp.scratch.database);
        let templates = common::templates();

        let started = Instant::now();
        for i in 0..rows {
            let v = verdict(i);
            let t = text(i);
            store
                .record(&NewVerdict { text: &t, source: if i % 5 == 0 { Source::Http } else { Source::Import }, user_id: Some(if i % 2 == 0 { "ana" } else { "budi" }), import: None, verdict: &v, templates: &templates })
                .await?;
        }
        let fill_ms = millis(started);
        println!("filled {rows} verdicts in {:.1} s: {:.0} verdicts/s recorded (one transaction each)", fill_ms / 1e3, rows as f64 / (fill_ms / 1e3));

        // An import's writes: rows of one batch, recorded 64 to a transaction as `aegis import`
        // does while its checker keeps up (crates/aegis-import/src/run.rs).
        let imported = (rows / 4).max(64);
        let batch = store.begin_import("bench.txt", "bench-sha", imported as i64).await?;
        let started = Instant::now();
        let mut row = 0;
        while row < imported {
            let group: Vec<(String, Verdict)> = (row..(row + 64).min(imported)).map(|i| (text(rows + i), verdict(i))).collect();
            let verdicts: Vec<NewVerdict<'_>> = group
                .iter()
                .enumerate()
                .map(|(k, (t, v))| NewVerdict { text: t, source: Source::Import, user_id: None, import: Some(aegis_store::ImportRow { batch_id: batch.id, row: (row + k as u64 + 1) as i64 }), verdict: v, templates: &templates })
                .collect();
            store.record_many(&verdicts).await?;
            row += group.len() as u64;
        }
        let import_ms = millis(started);

        let mut raw = sqlx::AnyConnection::connect(&temp.url()).await?;
        let repeat = 20;

        // A filtered page deep in history (the 21st), results attached, as the console shows it.
        let filter = HistoryFilter { failed_validator: Some("toxic".into()), source: Some(Source::Import), score: Some(ScoreRange { validator: Some("spam".into()), min: Some(0.2), max: None }), ..Default::default() };
        let mut cursor = None;
        for _ in 0..20 {
            cursor = store.list(&filter, cursor, 50).await?.next;
        }
        let started = Instant::now();
        for _ in 0..repeat {
            std::hint::black_box(store.list(&filter, cursor, 50).await?);
        }
        let page_ms = millis(started) / repeat as f64;
        // Full-text search vs a LIKE scan of every message.
        let search = HistoryFilter { text: Some("saham cuan nomor 4242".into()), ..Default::default() };
        let started = Instant::now();
        let mut found = 0;
        for _ in 0..repeat {
            found = store.list(&search, None, 50).await?.rows.len();
        }
        let fts_ms = millis(started) / repeat as f64;
        let started = Instant::now();
        let mut like_found = 0;
        for _ in 0..repeat {
            let ids: Vec<i64> = sqlx::query_scalar(
                "SELECT v.id FROM verdicts v JOIN messages m ON m.id = v.message_id
                 WHERE m.text LIKE '%saham%' AND m.text LIKE '%cuan%' AND m.text LIKE '%nomor 4242%'
                 ORDER BY v.created_at DESC, v.id DESC LIMIT 50",
            )
            .fetch_all(&mut raw)
            .await?;
            like_found = ids.len();
        }
        let like_ms = millis(started) / repeat as f64;

        // Export everything as JSONL and CSV.
        let mut sink = std::io::sink();
        let started = Instant::now();
        let exported = store.export(&HistoryFilter::default(), ExportFormat::Jsonl, &mut sink).await?;
        let jsonl_ms = millis(started);
        let started = Instant::now();
        store.export(&HistoryFilter::default(), ExportFormat::Csv, &mut sink).await?;
        let csv_ms = millis(started);

        println!();
        println!("| operation (on {rows} verdicts) | ours | baseline | baseline / ours |");
        println!("|---|---:|---:|---:|");
        println!("| filtered page: 21st page of 50, three filters, results attached | {page_ms:.2} ms | | |");
        println!("| text search, {found} hits (full-text index vs LIKE scan, {like_found} hits) | {fts_ms:.2} ms | {like_ms:.2} ms | {:.1}x |", like_ms / fts_ms);
        println!("| export JSONL, {exported} verdicts | {:.0} ms ({:.0} rows/s) | | |", jsonl_ms, exported as f64 / (jsonl_ms / 1e3));
        println!("| export CSV | {:.0} ms ({:.0} rows/s) | | |", csv_ms, exported as f64 / (csv_ms / 1e3));
        println!("| record (one transaction per verdict) | {:.3} ms each | | |", fill_ms / rows as f64);
        println!("| import's writes ({imported} rows, 64 to a transaction) | {:.3} ms each ({:.0} rows/s) | | |", import_ms / imported as f64, imported as f64 / (import_ms / 1e3));
        if let aegis_store::Database::Sqlite(path) = &temp.scratch.database {
            println!("database size: {:.1} MiB", std::fs::metadata(path)?.len() as f64 / 1048576.0);
        }
        Ok(())
    })
}
