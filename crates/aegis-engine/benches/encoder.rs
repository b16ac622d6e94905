//! `cargo bench -p aegis-engine --bench encoder`: EmbeddingGemma on this CPU, one text at a time
//! (short, medium, about 1,000 tokens: p50 of warm runs) and a batch of 200 distinct short texts
//! (texts a second), for each weight format in `AEGIS_BENCH_ENCODER_WEIGHTS` (default
//! `precise,int8`). The weight format line names the kernel that ran. The encoder comes from
//! `AEGIS_ENCODER_DIR` or the cache `scripts/setup-encoder.sh` fills; a synthetic folder of the
//! real shape (`scripts/reference/synthetic_encoder.py`) times the same arithmetic.
//! `AEGIS_CPU_KERNELS_OFF` takes kinds out of the choice, to compare them on one machine. Read
//! the figures against another build's or kind's from the same sitting, never alone.

use std::time::Instant;

use aegis_engine::{
    default_encoder_dir, DeviceChoice, EmbeddingGemma, EncoderArithmetic, SentenceEncoder,
};

fn main() {
    let folder = default_encoder_dir();
    let formats =
        std::env::var("AEGIS_BENCH_ENCODER_WEIGHTS").unwrap_or_else(|_| "precise,int8".into());
    let medium = "Halo kak, pesanan saya belum sampai padahal sudah lima hari. \
                  I paid for express shipping and the tracking page has not moved since Monday. "
        .repeat(4);
    let long =
        "Halo kak, pesanan saya belum sampai. I would like to know where my parcel is. ".repeat(50);
    let batch: Vec<String> = (0..200)
        .map(|i| {
            format!(
                "pesanan nomor {i} belum sampai, tolong dicek ya kak ({})",
                i * 7919 % 997
            )
        })
        .collect();
    for format in formats.split(',') {
        let arithmetic: EncoderArithmetic = match format.parse() {
            Ok(arithmetic) => arithmetic,
            Err(message) => {
                eprintln!("{message}");
                std::process::exit(2);
            }
        };
        let started = Instant::now();
        let encoder = match EmbeddingGemma::load_with(&folder, DeviceChoice::Cpu, arithmetic) {
            Ok(encoder) => encoder,
            Err(e) => {
                eprintln!("no encoder in {}: {e}", folder.display());
                std::process::exit(2);
            }
        };
        println!(
            "{format}: {} (loaded in {:.1} s)",
            encoder.info().weight_format,
            started.elapsed().as_secs_f64()
        );
        for (name, text) in [
            ("short", "makasih kak, paketnya sudah sampai"),
            ("medium", medium.as_str()),
            ("long", long.as_str()),
        ] {
            let tokens = encoder.tokens(text).map(|t| t.len()).unwrap_or(0);
            let runs = if name == "long" { 7 } else { 21 };
            let mut ms: Vec<f64> = (0..runs + 2)
                .map(|_| {
                    let started = Instant::now();
                    let embedded = encoder.embed_batch(&[text]);
                    assert!(embedded[0].is_ok(), "the text embeds");
                    started.elapsed().as_secs_f64() * 1e3
                })
                .skip(2)
                .collect();
            ms.sort_by(f64::total_cmp);
            println!(
                "  {name:>6} ({tokens:>4} tokens): p50 {:8.1} ms",
                ms[runs / 2]
            );
        }
        let texts: Vec<&str> = batch.iter().map(String::as_str).collect();
        encoder.embed_batch(&texts[..20]);
        let started = Instant::now();
        let embedded = encoder.embed_batch(&texts);
        let seconds = started.elapsed().as_secs_f64();
        assert!(embedded.iter().all(Result::is_ok), "every text embeds");
        println!(
            "  batch of {} short texts: {:.1} a second",
            texts.len(),
            texts.len() as f64 / seconds
        );
    }
}
