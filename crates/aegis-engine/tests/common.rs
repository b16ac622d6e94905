use aegis_engine::GemmaEngine;

/// The default model, loaded once for the whole test binary.
pub fn engine() -> &'static GemmaEngine {
    aegis_engine::testing::default_engine()
}
