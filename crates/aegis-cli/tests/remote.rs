//! `aegis check --backend` against a real llama.cpp server on 127.0.0.1.

use aegis_remote::testing::LlamaServer;

use crate::{aegis, stderr, stdout};

/// With heads on the decoder (whose hidden states a server does not return) the prompts decide,
/// and the command says so; heads on the default encoder would still run here.
#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn check_runs_on_a_model_server_and_says_the_prompts_decide() {
    let server = LlamaServer::start();
    let out = aegis(&[
        "check",
        "--backend",
        &server.url,
        "--encoder",
        "decoder",
        "--json",
        "makasih kak, paketnya sudah sampai",
    ]);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}\n{}",
        stderr(&out),
        server.log()
    );
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON on stdout");
    let steps: Vec<&str> = json["execution_per_step"]
        .as_array()
        .expect("steps")
        .iter()
        .filter_map(|s| s["step"].as_str())
        .collect();
    assert_eq!(steps, ["spam", "toxic", "harassment", "financial_advice"]);
    let said = stderr(&out);
    assert!(
        said.contains(&format!("note: the model is served by {}", server.url)),
        "{said}"
    );
    assert!(said.contains("prompt decides"), "{said}");

    let table = aegis(&[
        "check",
        "--backend",
        &server.url,
        "--no-history",
        "halo kak",
    ]);
    assert!(
        stdout(&table).contains(&format!("served by {}", server.url)),
        "{}",
        stdout(&table)
    );
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn a_model_server_that_is_not_there_is_named() {
    let free = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", free.local_addr().expect("address"));
    drop(free);
    let out = aegis(&["check", "--backend", &url, "--no-history", "halo"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(
        said.contains(&url) && said.contains("is the server running"),
        "{said}"
    );
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn training_heads_on_a_model_server_is_refused_before_it_is_reached() {
    let data = crate::repo_root().join("crates/aegis-cli/tests/fixtures/train-small.jsonl");
    let data = data.to_str().expect("UTF-8 path");
    // Nothing listens on port 9: the refusal must come before any connection.
    let out = aegis(&[
        "train",
        "--backend",
        "http://127.0.0.1:9",
        "--encoder",
        "decoder",
        "--data",
        data,
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("hidden states"), "{}", stderr(&out));
}
