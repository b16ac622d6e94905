//! `aegis token-states` through the real binary and the real encoder.

use crate::{aegis, stderr};

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn token_states_are_written_per_file_and_a_malformed_line_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("messages.jsonl");
    std::fs::write(
        &data,
        "{\"text\": \"makasih kak\"}\n\n{\"text\": \"he called me stupid in front of everyone\"}\n",
    )
    .expect("data");
    let out_dir = dir.path().join("states");
    let out = aegis(&[
        "token-states",
        "--data",
        data.to_str().expect("path"),
        "--out",
        out_dir.to_str().expect("path"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let bytes = std::fs::read(out_dir.join("messages.safetensors")).expect("a states file");
    let file = safetensors::SafeTensors::deserialize(&bytes).expect("safetensors");
    let lengths = file.tensor("lengths").expect("lengths");
    assert_eq!(
        lengths.shape(),
        [2],
        "one length a text, the blank line skipped"
    );
    let lengths: Vec<u32> = lengths
        .data()
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
        .collect();
    assert!(lengths.iter().all(|&n| n > 1), "{lengths:?}");
    let states = file.tensor("states").expect("states");
    let tokens: u32 = lengths.iter().sum();
    assert_eq!(states.shape(), [tokens as usize, 768]);
    assert_eq!(states.dtype(), safetensors::Dtype::F16);
    assert_eq!(
        file.tensor("projection.0").expect("dense").shape(),
        [3072, 768]
    );

    let broken = dir.path().join("broken.jsonl");
    std::fs::write(&broken, "{\"text\": \"fine\"}\nnot json\n").expect("data");
    let out = aegis(&[
        "token-states",
        "--data",
        broken.to_str().expect("path"),
        "--out",
        out_dir.to_str().expect("path"),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("broken.jsonl:2: not valid JSON"),
        "{}",
        stderr(&out)
    );
    assert!(!out_dir.join("broken.safetensors").exists());
}
