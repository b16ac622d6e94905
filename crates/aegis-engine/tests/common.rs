use std::sync::OnceLock;

use aegis_engine::{GemmaEngine, ModelRequest};

/// One engine per test binary: loading takes about a second and a few hundred MiB.
pub fn engine() -> &'static GemmaEngine {
    static ENGINE: OnceLock<GemmaEngine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        ModelRequest::new("default")
            .load()
            .map(|(engine, _)| engine)
            .unwrap_or_else(|e| panic!("the default model must be set up for these tests: {e}"))
    })
}
