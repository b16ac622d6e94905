//! The console's integration tests, one binary: the real model, a real history file, scratch
//! templates.

mod console;
mod teach;
