//! AEGIS Console: the desktop app. A thin Tauri shell over `console::Console`, which owns the
//! guard's worker, history, templates and the optional HTTP endpoint.

#[cfg(all(test, feature = "ts"))]
mod bindings;
mod commands;
mod error;

use std::path::PathBuf;
use std::sync::Arc;

use tauri::{Emitter, Manager};

use aegis_app::console::{Console, ConsoleConfig, ConsoleEvent, EventSink, ModelChoice};

struct TauriEvents(tauri::AppHandle);

impl EventSink for TauriEvents {
    fn emit(&self, event: ConsoleEvent) {
        if let Err(e) = self.0.emit("console", event) {
            tracing::warn!(error = %e, "an event did not reach the window");
        }
    }
}

/// `AEGIS_DATA_DIR`, else the platform's data folder (`~/.local/share/aegis-console` on Linux).
fn data_dir(app: &tauri::AppHandle) -> PathBuf {
    std::env::var_os("AEGIS_DATA_DIR")
        .map(PathBuf::from)
        .or_else(|| app.path().app_data_dir().ok())
        .unwrap_or_else(|| PathBuf::from(".aegis-console"))
}

pub fn run() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,tao=warn,wry=warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let launched = std::time::Instant::now();
    let result = tauri::Builder::default()
        .plugin(tauri_plugin_dialog::init())
        .setup(move |app| {
            let data_dir = data_dir(app.handle());
            let config = ConsoleConfig {
                data_dir,
                // Settings, then the guard's one rule, find the templates.
                prompts_dir: None,
                events: Arc::new(TauriEvents(app.handle().clone())),
                model: std::env::var("AEGIS_MODEL")
                    .map_or(ModelChoice::Settings, ModelChoice::Named),
            };
            let console = tauri::async_runtime::block_on(Console::start(config))?;
            app.manage(console);
            tracing::info!(
                setup_ms = launched.elapsed().as_secs_f64() * 1e3,
                "window ready to open"
            );
            // Templates edited by another editor reach the guard, and the window, live.
            let watched = app.state::<Arc<Console>>().inner().clone();
            tauri::async_runtime::spawn(async move { watched.watch_templates().await });
            Ok(())
        })
        .on_window_event(|window, event| {
            if let tauri::WindowEvent::Destroyed = event {
                let console = window.state::<Arc<Console>>().inner().clone();
                tauri::async_runtime::block_on(console.shutdown());
            }
        })
        // Every `#[tauri::command]` of commands.rs (listed by build.rs).
        .invoke_handler(include!(concat!(env!("OUT_DIR"), "/handlers.rs")))
        .run(tauri::generate_context!());
    if let Err(e) = result {
        tracing::error!(error = %e, "the app stopped");
        std::process::exit(1);
    }
}
