//! Exporting a filtered history, page by page so memory stays flat on any size.

use std::io::Write;

use crate::error::{Result, StoreError};
use crate::filter::HistoryFilter;
use crate::open::Store;
use crate::query::HistoryRow;
use crate::time::format_millis;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// One JSON object per verdict, results nested.
    Jsonl,
    /// One row per verdict; `score_<key>` and `passed_<key>` columns per validator.
    Csv,
}

impl std::str::FromStr for ExportFormat {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "jsonl" | "json" => Ok(Self::Jsonl),
            "csv" => Ok(Self::Csv),
            other => Err(StoreError::Invalid(format!(
                "unknown export format {other:?}: use csv or jsonl"
            ))),
        }
    }
}

const PAGE: u32 = 500;

impl Store {
    /// Writes every verdict the filter matches, newest first; returns how many.
    pub async fn export(
        &self,
        filter: &HistoryFilter,
        format: ExportFormat,
        out: &mut (dyn Write + Send),
    ) -> Result<u64> {
        let export_err = |e: &dyn std::fmt::Display| StoreError::Export(e.to_string());
        let keys: Vec<String> = {
            let mut q = crate::sql::Sql::new(
                "SELECT r.validator_key FROM validator_results r JOIN verdicts v ON v.id = r.verdict_id JOIN messages m ON m.id = v.message_id WHERE TRUE",
            );
            filter.push_conditions(&mut q, self.engine());
            q.push(" GROUP BY r.validator_key ORDER BY min(r.position), r.validator_key");
            let (text, args) = q.into_parts().map_err(|e| self.sql(e))?;
            sqlx::query_scalar_with(&text, args)
                .fetch_all(&self.reader)
                .await
                .map_err(|e| self.sql(e))?
        };
        enum Sink<'a> {
            Csv(Box<csv::Writer<&'a mut (dyn Write + Send)>>),
            Jsonl(&'a mut (dyn Write + Send)),
        }
        let mut sink = match format {
            ExportFormat::Csv => {
                let mut w = csv::Writer::from_writer(out);
                let mut header: Vec<String> = [
                    "verdict_id",
                    "created_at",
                    "status",
                    "case",
                    "source",
                    "user_id",
                    "language",
                    "text",
                    "rejection_message",
                    "model_id",
                    "model_hash",
                    "encoder_id",
                    "encoder_hash",
                    "role",
                    "turn_index",
                    "latency_ms",
                    "reviews",
                ]
                .map(String::from)
                .to_vec();
                for key in &keys {
                    header.extend(PER_VALIDATOR.map(|column| format!("{column}_{key}")));
                }
                w.write_record(&header).map_err(|e| export_err(&e))?;
                Sink::Csv(Box::new(w))
            }
            ExportFormat::Jsonl => Sink::Jsonl(out),
        };
        let mut written = 0u64;
        let mut after = None;
        loop {
            let page = self.list(filter, after, PAGE).await?;
            for row in &page.rows {
                match &mut sink {
                    Sink::Csv(w) => w
                        .write_record(csv_record(row, &keys))
                        .map_err(|e| export_err(&e))?,
                    Sink::Jsonl(out) => {
                        let mut json = serde_json::to_value(row).map_err(|e| export_err(&e))?;
                        json["created_at"] = format_millis(row.created_at).into();
                        serde_json::to_writer(&mut **out, &json).map_err(|e| export_err(&e))?;
                        out.write_all(b"\n").map_err(|e| export_err(&e))?;
                    }
                }
                written += 1;
            }
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        match sink {
            Sink::Csv(mut w) => w.flush().map_err(|e| export_err(&e))?,
            Sink::Jsonl(out) => out.flush().map_err(|e| export_err(&e))?,
        }
        Ok(written)
    }
}

/// A cell a spreadsheet shows as text, never runs as a formula: text from HTTP clients and
/// imported files that starts with `=`, `+`, `-`, `@`, a tab or a carriage return gets a leading
/// `'` (OWASP's advice against CSV injection). JSONL keeps the text exactly.
fn as_text_cell(value: &str) -> String {
    if value.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{value}")
    } else {
        value.to_string()
    }
}

/// A validator's columns, each suffixed with its key: what a reviewer's spreadsheet needs to see
/// why it decided as it did (by a head or its prompt, at which threshold, on which reading of the
/// turn, and which reading turned the decision, such as a quote read as mentioned).
const PER_VALIDATOR: [&str; 7] = [
    "score",
    "passed",
    "decided_by",
    "threshold",
    "read_as",
    "turned_by",
    "head_hash",
];

fn csv_record(row: &HistoryRow, keys: &[String]) -> Vec<String> {
    let mut record = vec![
        row.verdict_id.to_string(),
        format_millis(row.created_at),
        row.status.clone(),
        row.case.clone(),
        row.source.clone(),
        as_text_cell(row.user_id.as_deref().unwrap_or_default()),
        row.language.clone(),
        as_text_cell(&row.text),
        as_text_cell(&row.rejection_message),
        as_text_cell(&row.model_id),
        row.model_hash.clone(),
        as_text_cell(row.encoder_id.as_deref().unwrap_or_default()),
        as_text_cell(row.encoder_hash.as_deref().unwrap_or_default()),
        row.role.as_str().to_string(),
        row.turn_index.to_string(),
        format!("{:.1}", row.latency_ms),
        row.review_count.to_string(),
    ];
    for key in keys {
        match row.results.iter().find(|r| &r.key == key) {
            Some(r) => {
                let readings = |keep: fn(&aegis_guard::ReadingScore) -> bool| {
                    r.readings
                        .iter()
                        .filter(|reading| keep(reading))
                        .map(|reading| reading.reading.as_str())
                        .collect::<Vec<_>>()
                        .join("+")
                };
                record.extend([
                    format!("{:.6}", r.score),
                    r.passed.to_string(),
                    r.decided_by.clone(),
                    format!("{:.6}", r.threshold),
                    readings(|reading| reading.decided),
                    readings(|reading| reading.turned),
                    r.head_hash.clone().unwrap_or_default(),
                ]);
            }
            None => record.extend(PER_VALIDATOR.map(|_| String::new())),
        }
    }
    record
}

#[cfg(test)]
mod tests {
    use super::as_text_cell;

    #[test]
    fn a_cell_that_would_be_a_formula_is_kept_as_text() {
        for formula in [
            "=HYPERLINK(\"http://x\")",
            "+1",
            "-2+3",
            "@SUM(A1)",
            "\tx",
            "\rx",
        ] {
            assert_eq!(as_text_cell(formula), format!("'{formula}"));
        }
        assert_eq!(as_text_cell("halo = hai"), "halo = hai");
        assert_eq!(as_text_cell(""), "");
    }
}
