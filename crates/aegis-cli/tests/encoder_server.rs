//! The shipped heads on embeddings from a real `llama-server --embeddings` serving the project's
//! EmbeddingGemma GGUF (scripts/setup-encoder-gguf.sh) on 127.0.0.1.

use std::process::Stdio;
use std::time::{Duration, Instant};

use aegis_remote::testing::LlamaServer;

use crate::{aegis, aegis_command, stderr, stdout};

/// Messages in both languages, each validator's kind and everyday ones.
const MESSAGES: &[&str] = &[
    "kamu bodoh sekali, dasar anjing",
    "Makasih kak, paketnya sudah sampai dengan selamat",
    "You are a worthless idiot and everyone hates you",
    "Can we move the meeting to 3pm tomorrow?",
    "PROMO!!! Klik link ini sekarang dapat saldo gratis 500rb",
    "You should put all your savings into this coin now, it will 10x by Friday",
    "Saya akan cari rumahmu dan kamu akan menyesal",
    "what does the word 'anjing' mean when someone says it to my kid?",
];

/// Each message's verdict line (`check --file --json` prints one JSON object per line).
fn verdicts(extra: &[&str], file: &std::path::Path) -> Vec<serde_json::Value> {
    let mut args = vec![
        "check",
        "--no-history",
        "--json",
        "--file",
        file.to_str().expect("UTF-8 path"),
    ];
    args.extend_from_slice(extra);
    let out = aegis(&args);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{:?}: {}",
        extra,
        stderr(&out)
    );
    stdout(&out)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("a JSON verdict per line"))
        .collect()
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn served_embeddings_give_the_local_encoders_verdicts() {
    let server = LlamaServer::embeddings(&[]);
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("messages.txt");
    std::fs::write(&file, MESSAGES.join("\n")).expect("write");

    let local = verdicts(&[], &file);
    let served = verdicts(&["--encoder-server", &server.url], &file);
    assert_eq!(local.len(), MESSAGES.len());
    assert_eq!(served.len(), MESSAGES.len(), "{}", server.log());
    for (here, there) in local.iter().zip(&served) {
        let text = here["question"].as_str().unwrap_or_default();
        assert_eq!(
            here["execution_per_step"], there["execution_per_step"],
            "{text}"
        );
        for (validator, score) in here["scores"].as_object().expect("scores") {
            let (ours, theirs) = (
                score.as_f64().expect("a score"),
                there["scores"][validator].as_f64().expect("a served score"),
            );
            assert!(
                (ours - theirs).abs() <= 0.02,
                "{text}: {validator} {ours} here, {theirs} through the server"
            );
        }
    }
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn a_server_that_pools_differently_is_refused_with_both_figures() {
    // The first token's state instead of the mean: the right model, the wrong embedding.
    let server = LlamaServer::embeddings(&["--pooling", "cls"]);
    let out = aegis(&[
        "check",
        "--no-history",
        "--encoder-server",
        &server.url,
        "halo kak",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(
        said.contains(&server.url) && said.contains("cosine") && said.contains("probe"),
        "{said}"
    );
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn an_import_pauses_while_the_encoder_server_is_down_and_records_every_row_once() {
    let server = LlamaServer::embeddings(&[]);
    let (port, url) = (server.port, server.url.clone());
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("h.db");
    let file = dir.path().join("messages.txt");
    let rows = 120;
    let lines: Vec<String> = (0..rows)
        .map(|i| format!("{} ({i})", MESSAGES[i % MESSAGES.len()]))
        .collect();
    std::fs::write(&file, lines.join("\n")).expect("write");
    let mut import = aegis_command(&[
        "import",
        file.to_str().expect("path"),
        "--encoder-server",
        &server.url,
    ]);
    let mut child = import
        .env("AEGIS_DB", &db)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // Validator results recorded so far: progress, whatever the rows' count.
    let recorded = || -> u64 {
        let out = aegis_command(&["history", "stats", "--json"])
            .env("AEGIS_DB", &db)
            .output()
            .expect("runs");
        serde_json::from_str::<serde_json::Value>(&stdout(&out))
            .ok()
            .and_then(|v| {
                v.as_array()
                    .map(|days| days.iter().filter_map(|d| d["checked"].as_u64()).sum())
            })
            .unwrap_or(0)
    };
    let started = Instant::now();
    while recorded() < 10 {
        assert!(
            child.try_wait().expect("poll").is_none(),
            "finished too soon"
        );
        assert!(started.elapsed() < Duration::from_secs(300), "no progress");
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(server);
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        child.try_wait().expect("poll").is_none(),
        "the import stopped instead of pausing"
    );
    let _restarted = LlamaServer::embeddings_on_port(&[], port);
    let finished = child.wait_with_output().expect("the import ends");
    let said = String::from_utf8_lossy(&finished.stderr);
    assert!(finished.status.success(), "{said}");
    assert!(said.contains("paused"), "{said}");
    assert!(
        said.contains("(0 bad rows)"),
        "nothing recorded as failed: {said}"
    );
    // Every verdict names the encoder it read: the served model, at the server's URL.
    let listed = aegis_command(&["history", "list", "--json", "--limit", "500"])
        .env("AEGIS_DB", &db)
        .output()
        .expect("runs");
    let listed: serde_json::Value =
        serde_json::from_str(&stdout(&listed)).expect("history as JSON");
    let listed = listed["rows"].as_array().expect("rows");
    assert_eq!(listed.len(), rows, "one verdict per row: {said}");
    for row in listed {
        assert_eq!(row["encoder_hash"], serde_json::json!(url), "{row}");
        assert!(
            row["encoder_id"]
                .as_str()
                .is_some_and(|id| id.contains("embeddinggemma")),
            "{row}"
        );
    }
}

/// The scores of `validator` in `verdicts`, in order.
fn scores_of(verdicts: &[serde_json::Value], validator: &str) -> Vec<f64> {
    verdicts
        .iter()
        .map(|v| v["scores"][validator].as_f64().expect("a score"))
        .collect()
}

/// A server that pools nothing (`llama-server --pooling none`) answers with each token's state:
/// the shipped heads read their mean (the sentence embedding) as they read the local encoder's,
/// and a head that pools the token states with a learned query scores through it as it does
/// locally.
#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn a_server_that_pools_nothing_serves_the_sentence_embedding_and_pooling_heads() {
    let server = LlamaServer::embeddings(&["--pooling", "none"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("messages.txt");
    std::fs::write(&file, MESSAGES.join("\n")).expect("write");
    let local = verdicts(&[], &file);
    let served = verdicts(&["--encoder-server", &server.url], &file);
    assert_eq!(served.len(), MESSAGES.len(), "{}", server.log());
    for validator in ["spam", "harassment", "financial_advice"] {
        for (ours, theirs) in scores_of(&local, validator)
            .iter()
            .zip(scores_of(&served, validator))
        {
            assert!(
                (ours - theirs).abs() <= 0.02,
                "{validator}: {ours} here, {theirs} through the server"
            );
        }
    }

    // The shipped toxic head, made to pool with a query along its own weights (its reading of
    // layer 16, which no server returns, taken out so both sides read the same).
    let prompts = dir.path().join("prompts");
    std::fs::create_dir_all(prompts.join("heads")).expect("mkdir");
    let shipped = crate::repo_root().join("prompt_guard");
    std::fs::copy(shipped.join("toxic.txt"), prompts.join("toxic.txt")).expect("copy");
    let mut head: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(shipped.join("heads/toxic.json")).expect("shipped head"),
    )
    .expect("JSON");
    let weights: Vec<f64> = head["weights"]
        .as_array()
        .expect("weights")
        .iter()
        .map(|w| w.as_f64().expect("a weight"))
        .collect();
    let norm = weights.iter().map(|w| w * w).sum::<f64>().sqrt();
    let query: Vec<f64> = weights.iter().map(|w| 4.0 * w / norm).collect();
    let object = head.as_object_mut().expect("an object");
    object.remove("readings");
    object.insert(
        "pooling".into(),
        serde_json::json!({
            "query": query,
            "options": {"epochs": 4, "batch_rows": 128, "learning_rate": 0.01,
                        "head_learning_rate": 0.001, "decay": 0.002, "seed": 1},
            "choice": {"folds": 5, "mean_roc_auc": 0.9, "attention_roc_auc": 0.91}
        }),
    );
    std::fs::write(
        prompts.join("heads/toxic.json"),
        serde_json::to_string_pretty(&head).expect("JSON"),
    )
    .expect("write");
    let with_prompts = |extra: &[&str]| {
        let mut args = vec!["--prompts", prompts.to_str().expect("path")];
        args.extend_from_slice(extra);
        verdicts(&args, &file)
    };
    let local = with_prompts(&[]);
    let served = with_prompts(&["--encoder-server", &server.url]);
    assert_eq!(served.len(), MESSAGES.len(), "{}", server.log());
    for ((here, there), text) in scores_of(&local, "toxic")
        .iter()
        .zip(scores_of(&served, "toxic"))
        .zip(MESSAGES)
    {
        assert!(
            (here - there).abs() <= 0.02,
            "{text}: toxic {here} here, {there} through the server"
        );
    }
    assert!(
        scores_of(&local, "toxic")[0] > 0.5,
        "the pooling head still reads an insult: {local:?}"
    );

    // A server that pools says why it cannot serve a pooling head.
    let pooled = LlamaServer::embeddings(&[]);
    let out = aegis(&[
        "check",
        "--no-history",
        "--prompts",
        prompts.to_str().expect("path"),
        "--encoder-server",
        &pooled.url,
        "halo kak",
    ]);
    assert!(stderr(&out).contains("--pooling none"), "{}", stderr(&out));
}
