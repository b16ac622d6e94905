//! Real-model tests: the default Gemma 3 270M through the real loading code. The README's test
//! command fetches the model first (scripts/setup-model.sh); a missing model fails, never skips.

mod common;
mod devices;
mod encoder;
mod reference;
mod scoring;
mod tokenizer;
