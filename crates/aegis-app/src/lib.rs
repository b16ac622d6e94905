//! The desktop console as a service, without the window: the guard's worker and model state,
//! checks and history, imports, the template editor, evaluation, settings and the optional HTTP
//! endpoint. The Tauri shell (`src-tauri`) is thin commands over `console::Console`; tests drive
//! it directly with the real model and a real history file.

pub mod console;
pub mod error;
pub mod evaluation;
pub mod examples;
pub mod http;
pub mod playground;
pub mod settings;
pub mod teach;
pub mod templates;
