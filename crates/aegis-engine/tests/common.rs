use std::sync::OnceLock;

use aegis_engine::{resolve, GemmaEngine, HubOptions, LoadOptions, ModelSpec};

/// One engine per test binary: loading takes about a second and a few hundred MiB.
pub fn engine() -> &'static GemmaEngine {
    static ENGINE: OnceLock<GemmaEngine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let resolved = resolve(&ModelSpec::Default, &HubOptions::default())
            .unwrap_or_else(|e| panic!("the default model must be set up for these tests: {e}"));
        GemmaEngine::load(&resolved, &LoadOptions::default())
            .unwrap_or_else(|e| panic!("loading the default model failed: {e}"))
    })
}
