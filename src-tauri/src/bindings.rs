//! The TypeScript types the window uses, generated from the Rust definitions. This test fails
//! when `ui/src/bindings/` is stale; `AEGIS_UPDATE_BINDINGS=1 cargo test -p aegis-console
//! bindings` rewrites it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ts_rs::TS;

fn export(out: &Path) {
    let all = [
        aegis_app::console::ConsoleEvent::export_all_to(out),
        aegis_app::console::CheckResult::export_all_to(out),
        aegis_guard::TurnsChecked::export_all_to(out),
        aegis_app::console::FilePreview::export_all_to(out),
        aegis_app::console::Exported::export_all_to(out),
        aegis_app::console::HistoryQuery::export_all_to(out),
        aegis_app::console::TryRow::export_all_to(out),
        aegis_app::console::AppInfo::export_all_to(out),
        crate::error::CommandError::export_all_to(out),
        aegis_app::error::ErrorKind::export_all_to(out),
        aegis_app::http::HttpStatus::export_all_to(out),
        aegis_app::playground::PlaygroundRequest::export_all_to(out),
        aegis_app::settings::Settings::export_all_to(out),
        aegis_app::templates::TemplateFile::export_all_to(out),
        aegis_import::ImportSummary::export_all_to(out),
        aegis_store::HistoryPage::export_all_to(out),
        aegis_store::VerdictDetail::export_all_to(out),
        aegis_store::ReviewQueue::export_all_to(out),
        aegis_store::QueuePolicy::export_all_to(out),
        aegis_store::ReviewerAgreement::export_all_to(out),
        aegis_store::Member::export_all_to(out),
        aegis_store::AuditEntry::export_all_to(out),
        aegis_store::TemplateSave::export_all_to(out),
        aegis_store::Decision::export_all_to(out),
        aegis_store::EvalRunSummary::export_all_to(out),
        aegis_app::evaluation::EvalView::export_all_to(out),
        aegis_eval::Comparison::export_all_to(out),
        aegis_app::teach::TeachValidator::export_all_to(out),
        aegis_app::teach::TrainReport::export_all_to(out),
        aegis_app::teach::AppliedHead::export_all_to(out),
        aegis_app::examples::Marked::export_all_to(out),
        aegis_app::teach::NewValidator::export_all_to(out),
        aegis_store::StoredExample::export_all_to(out),
        aegis_store::HeadVersion::export_all_to(out),
        aegis_app::teach::Suggestion::export_all_to(out),
    ];
    for result in all {
        result.expect("export a TypeScript binding");
    }
    // The commands with their arguments and results, as build.rs read them from
    // src/commands.rs, so the window can only call a command that exists, with its arguments.
    std::fs::write(
        out.join("Commands.ts"),
        include_str!(concat!(env!("OUT_DIR"), "/Commands.ts")),
    )
    .expect("write Commands.ts");
}

fn read_dir(dir: &Path) -> BTreeMap<String, String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter(|e| e.path().extension().is_some_and(|x| x == "ts"))
                .map(|e| {
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        std::fs::read_to_string(e.path()).unwrap_or_default(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn bindings_match_the_rust_types() {
    let committed = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../ui/src/bindings");
    if std::env::var("AEGIS_UPDATE_BINDINGS").is_ok_and(|v| v == "1") {
        let _ = std::fs::remove_dir_all(&committed);
        export(&committed);
        return;
    }
    let fresh = tempfile::tempdir().expect("tempdir");
    export(fresh.path());
    assert_eq!(
        read_dir(fresh.path()),
        read_dir(&committed),
        "ui/src/bindings is stale: run AEGIS_UPDATE_BINDINGS=1 cargo test -p aegis-console bindings"
    );
}
