fn main() {
    // The window's files are embedded at compile time. Before `npm run build` has made them (a
    // fresh clone running `cargo test`), embed a page that says so instead of failing to compile.
    let dist = std::path::Path::new("../ui/dist");
    if !dist.join("index.html").exists() {
        println!("cargo:warning=ui/dist is missing: the app will show a placeholder; run `npm --prefix ui run build`");
        std::fs::create_dir_all(dist).expect("create ui/dist");
        std::fs::write(
            dist.join("index.html"),
            "<!doctype html><title>AEGIS Console</title><p>The interface is not built: run <code>npm --prefix ui run build</code>, then rebuild the app.</p>",
        )
        .expect("write the placeholder page");
    }
    println!("cargo:rerun-if-changed=../ui/dist");
    // Declaring the app's commands makes each one a permission (`allow-check`, ...) that the
    // capability file must grant: the window can call nothing it was not given.
    tauri_build::try_build(tauri_build::Attributes::new().app_manifest(
        tauri_build::AppManifest::new().commands(&[
            "app_info",
            "model_state",
            "check",
            "preview_file",
            "import_file",
            "cancel_run",
            "review_queue",
            "review",
            "undo_review",
            "history",
            "history_count",
            "verdict",
            "export_history",
            "templates",
            "save_template",
            "template_versions",
            "try_template",
            "settings",
            "update_settings",
            "http_status",
            "evaluate",
            "eval_runs",
            "eval_run",
            "compare_runs",
            "delete_eval_run",
            "apply_threshold",
        ]),
    ))
    .expect("tauri build script");
}
