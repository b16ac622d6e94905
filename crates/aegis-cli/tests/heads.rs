//! Learned heads through the real binary and the real model.

use crate::{aegis, aegis_command, repo_root, stderr, stdout};

/// `aegis check` of `text` with the templates (and heads) in `prompts`.
fn check_with_templates(prompts: &std::path::Path, text: &str) -> std::process::Output {
    aegis(&[
        "check",
        "--no-history",
        "--prompts",
        prompts.to_str().expect("path"),
        text,
    ])
}

/// The words of `validator`'s line in `aegis check`'s table: validator, score, by, prompt,
/// threshold, verdict.
fn table_row<'a>(table: &'a str, validator: &str) -> Vec<&'a str> {
    table
        .lines()
        .find(|l| l.starts_with(&format!("{validator} ")))
        .unwrap_or_else(|| panic!("a {validator} line: {table}"))
        .split_whitespace()
        .collect()
}

/// `aegis train ARGS` with its feature cache in `dir`; it must succeed.
fn train(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    let mut all = vec!["train"];
    all.extend_from_slice(args);
    let out = aegis_command(&all)
        .env("AEGIS_FEATURE_CACHE", dir.join("cache"))
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", stderr(&out));
    out
}

/// A templates folder in `dir` holding the shipped toxic template alone (no head yet), and the
/// small training file.
fn toxic_alone(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let prompts = dir.join("prompts");
    std::fs::create_dir_all(&prompts).expect("mkdir");
    std::fs::copy(
        repo_root().join("prompt_guard/toxic.txt"),
        prompts.join("toxic.txt"),
    )
    .expect("copy template");
    let data = repo_root().join("crates/aegis-cli/tests/fixtures/train-small.jsonl");
    (prompts, data)
}

/// `aegis train` with `args`, which must fail; what it said.
fn refused_training(dir: &std::path::Path, args: &[&str]) -> String {
    let refused = aegis_command(&[&["train"], args].concat())
        .env("AEGIS_FEATURE_CACHE", dir.join("cache"))
        .output()
        .expect("runs");
    assert!(!refused.status.success(), "{}", stderr(&refused));
    stderr(&refused)
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn shipped_heads_rank_the_obvious_cases() {
    // One run for the four messages: each `aegis check` process loads both models.
    let results = check_file(
        &[
            "dasar goblok kamu anjing",
            "Bagaimana cara top up saldo?",
            "Beli saham BBCA sekarang, pasti cuan 50% minggu depan!",
            "Selamat pagi, apa kabar?",
        ],
        &[],
    );
    let score = |row: usize, key: &str| results[row]["scores"][key].as_f64().expect("score");
    let (toxic, benign) = (score(0, "toxic"), score(1, "toxic"));
    assert!(toxic > benign, "toxic {toxic} vs benign {benign}");
    let (advice, greeting) = (score(2, "financial_advice"), score(3, "financial_advice"));
    assert!(advice > greeting, "advice {advice} vs greeting {greeting}");
    // The table says who decided; a head-decided validator's prompt did not run.
    let table = stdout(&aegis(&["check", "--no-history", "halo"]));
    assert_eq!(table.matches(" head ").count(), 4, "{table}");
    assert_eq!(table.matches("      - ").count(), 4, "{table}");
    // Asked for, both scores are reported.
    let both = stdout(&aegis(&[
        "check",
        "--no-history",
        "--prompt-scores",
        "halo",
    ]));
    assert_eq!(both.matches(" head ").count(), 4, "{both}");
    assert_eq!(both.matches("      - ").count(), 0, "{both}");
}

/// Checks `passing` and `insults` in one `aegis check --file` run: every passing message passes
/// every validator, and every insult fails toxic.
fn every_one_passes_and_each_insult_fails_toxic(passing: &[&str], insults: &[&str]) {
    let lines: Vec<&str> = passing.iter().chain(insults).copied().collect();
    for result in &check_file(&lines, &[]) {
        let text = result["question"].as_str().expect("question");
        if passing.contains(&text) {
            assert_eq!(result["case"], "aman", "{text:?}: {}", result["scores"]);
        } else {
            let toxic = result["execution_per_step"]
                .as_array()
                .expect("steps")
                .iter()
                .find(|step| step["step"] == "toxic")
                .expect("toxic step");
            assert_eq!(toxic["status"], "failed", "{text:?}: {}", result["scores"]);
        }
    }
}

/// `aegis check --file` of `lines` with `args` besides: one result a line, in order.
fn check_file(lines: &[&str], args: &[&str]) -> Vec<serde_json::Value> {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("messages.txt");
    std::fs::write(&file, lines.join("\n")).expect("write messages");
    let file = file.to_string_lossy();
    let mut all = vec!["check", "--no-history", "--file", &file];
    all.extend_from_slice(args);
    let out = aegis(&all);
    assert!(out.status.code().is_some_and(|c| c < 2), "{}", stderr(&out));
    let results: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSONL"))
        .collect();
    assert_eq!(results.len(), lines.len());
    results
}

/// Everyday messages of the kinds the heads once flagged on unseen traffic (issue "Verdicts that
/// hold on traffic nobody here wrote"), written for this test and in no training file: short
/// acknowledgements and customer-service messages with an order number and a link pass every
/// validator in each language, and a clear insult in each language fails toxic.
#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn everyday_messages_pass_and_clear_insults_fail_in_each_language() {
    every_one_passes_and_each_insult_fails_toxic(&EVERYDAY, &CLEAR_INSULTS);
}

const EVERYDAY: [&str; 6] = [
    "ok thanks!",
    "sounds good, see you then",
    "oke makasih ya",
    "sip, ditunggu kabarnya",
    "Hi, my order #A-558210 hasn't arrived yet, the tracking page \
         https://track.example.com/A-558210 says it left the warehouse last week. Can you check?",
    "Kak, pesanan no. 230915-KX77 belum sampai, resinya JX9981 bisa dicek di \
         https://cekresi.example.id ya",
];

const CLEAR_INSULTS: [&str; 2] = [
    "you are a pathetic moron and nobody wants you here",
    "dasar tolol, otak kamu di dengkul ya",
];

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn a_report_quoting_an_insult_passes_and_the_insult_said_fails_in_each_language() {
    every_one_passes_and_each_insult_fails_toxic(&REPORTS, &QUOTED_INSULTS);
}

// Written for this test (none is in the training data); toxic and harassment read quotes as
// reported, so the report is also read with the insult elided.
const QUOTED_INSULTS: [&str; 2] = [
    "you are a worthless idiot",
    "dasar goblok, kamu nggak berguna",
];

const REPORTS: [&str; 4] = [
        "Someone in my class group chat keeps sending me \"you are a worthless idiot\". How do I report them?",
        "A stranger replied \"you are a worthless idiot\" under all my photos, I have screenshots of every one.",
        "Ada yang terus kirim \"dasar goblok, kamu nggak berguna\" ke aku di grup kelas. Cara laporinnya gimana?",
        "Teman sekantor bilang \"dasar goblok, kamu nggak berguna\" di depan semua orang, aku mau lapor ke HRD.",
];

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn an_exclamation_aimed_at_no_one_passes_and_an_insult_to_the_reader_fails_in_each_language() {
    // Written for this test (in no data file). Toxic and harassment read a user's opening
    // exclamation as elided; a name for the reader is no exclamation.
    let exclamations = [
        "Shit, the printer jammed again right before my deadline. How do I clear a paper jam?",
        "Anjir, hujan deres banget dan aku lupa bawa jas hujan. Ada ojek yang bisa dipesan sekarang?",
    ];
    // They open the way an exclamation does. (An insult used only as a word of address before
    // an ordinary request, "Moron, why did you cancel my order?", still passes the heads: README,
    // "Swearing at one's luck".)
    let insults = [
        "Damn you, you lying idiot, you cancelled my order without telling me.",
        "Bangsat kamu, pesananku kamu batalin seenaknya, dasar goblok nggak becus.",
    ];
    every_one_passes_and_each_insult_fails_toxic(&exclamations, &insults);
}

/// The weight formats the encoder offers (`--encoder-weights`) give the same verdicts on the
/// messages the real-model tests above check. Where the CPU has no VNNI, `int8` is `precise`
/// and this holds trivially; it says so.
#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn every_encoder_weight_format_gives_the_same_verdicts() {
    let lines: Vec<&str> = [&EVERYDAY[..], &CLEAR_INSULTS, &REPORTS, &QUOTED_INSULTS].concat();
    let verdicts = |format: &str| -> Vec<String> {
        check_file(&lines, &["--encoder-weights", format])
            .iter()
            .map(|result| format!("{}: {}", result["question"], result["execution_per_step"]))
            .collect()
    };
    if aegis_engine::KernelKind::detect_int8().is_none() {
        eprintln!("no int8 kernel on this CPU: int8 reads as precise");
    }
    assert_eq!(verdicts("precise"), verdicts("int8"));
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn contempt_without_a_rude_word_fails_toxic_and_civil_criticism_passes_in_each_language() {
    // Written for this test (in no data file). The shipped toxic head keeps a second reading for
    // contempt (`--reading toxic:contempt=...`); sarcasm about a task ("how brave of you to
    // attempt a spreadsheet") still passes it, so these are contempt for a person or a group.
    let contempt = [
        "People like you should be kept away from decent society, quietly and for good.",
        "Kasihan ya, orang sepertimu memang ditakdirkan cuma jadi penonton hidup orang lain.",
    ];
    let criticism = [
        "I think this plan is wrong: the budget ignores the cost of hiring.",
        "Menurut saya keputusan rapat tadi kurang tepat, datanya belum lengkap.",
    ];
    every_one_passes_and_each_insult_fails_toxic(&criticism, &contempt);
}

/// `--reading` trains a second map beside the head, kept in its file and aligned to its
/// threshold; a reading for a validator not trained is refused before anything is read.
#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn a_reading_is_trained_beside_the_head_and_kept_in_its_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let prompts = dir.path().join("prompts");
    std::fs::create_dir_all(&prompts).expect("mkdir");
    for template in ["toxic.txt", "spam.txt"] {
        std::fs::copy(
            repo_root().join("prompt_guard").join(template),
            prompts.join(template),
        )
        .expect("copy template");
    }
    let fixtures = repo_root().join("crates/aegis-cli/tests/fixtures");
    let data = fixtures.join("train-small.jsonl");
    let reading = format!(
        "toxic:contempt={}",
        fixtures.join("contempt-small.jsonl").display()
    );
    let mut args = vec![
        "toxic",
        "--data",
        data.to_str().expect("path"),
        "--folds",
        "3",
        "--layers",
        "embedding",
        "--tune-thresholds",
        "--prompts",
        prompts.to_str().expect("path"),
        "--reading",
        &reading,
    ];
    let out = train(dir.path(), &args);
    assert!(
        stderr(&out).contains("toxic: reading \"contempt\": 9 rows of"),
        "{}",
        stderr(&out)
    );
    let head: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(prompts.join("heads/toxic.json")).expect("head written"),
    )
    .expect("JSON");
    let readings = head["readings"].as_array().expect("readings");
    assert_eq!(readings.len(), 1);
    assert_eq!(readings[0]["name"], "contempt");
    assert_eq!(readings[0]["weights"].as_array().map(Vec::len), Some(768));
    assert_eq!(
        readings[0]["aligned_to"], head["training"]["threshold"],
        "aligned to the head's own threshold"
    );
    assert!(
        readings[0].get("layers").is_none(),
        "it reads the head's input"
    );

    // `--reading-layers 16`: the reading reads the mean after layer 16 (as the shipped one does),
    // and a verdict reads that layer beside the embedding.
    let with_layers = [&args[..], &["--reading-layers", "16"]].concat();
    let out = train(dir.path(), &with_layers);
    let head: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(prompts.join("heads/toxic.json")).expect("head written"),
    )
    .expect("JSON");
    assert_eq!(
        head["readings"][0]["layers"],
        serde_json::json!([16]),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        head["features"]["layers"],
        serde_json::json!([]),
        "the head reads the embedding"
    );
    let checked = check_with_templates(&prompts, "People like you are a stain on this town.");
    assert!(
        checked.status.success() || checked.status.code() == Some(1),
        "{}",
        stderr(&checked)
    );
    assert_eq!(
        table_row(&stdout(&checked), "toxic")[2],
        "head",
        "{}",
        stdout(&checked)
    );

    args[0] = "spam";
    let said = refused_training(dir.path(), &args);
    assert!(
        said.contains("toxic is not among the validators trained here"),
        "{said}"
    );
}

/// A bf16 copy hashes otherwise; the shipped heads take it once it embeds their probes as they
/// recorded, and its verdicts are the original's (what a GPU machine is sent: half the bytes).
#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn a_bf16_copy_of_the_encoder_is_read_by_the_shipped_heads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let copy = dir.path().join("encoder-bf16");
    let copy_arg = copy.to_str().expect("path");
    let out = aegis(&["model", "encoder-bf16", copy_arg]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("transformer weights in bf16"),
        "{}",
        stdout(&out)
    );
    let again = aegis(&["model", "encoder-bf16", copy_arg]);
    assert!(!again.status.success());
    assert!(
        stderr(&again).contains("already holds weights"),
        "{}",
        stderr(&again)
    );
    for (text, toxic) in [
        ("you are a worthless idiot and everyone hates you", true),
        ("makasih kak, pesanan saya sudah sampai", false),
    ] {
        let out = aegis(&["check", "--no-history", "--encoder", copy_arg, text]);
        assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
        let table = stdout(&out);
        let row = table_row(&table, "toxic");
        assert_eq!(row[2], "head", "{table}");
        assert_eq!(row[5] == "FAILED", toxic, "{text}: {table}");
    }
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn a_head_for_another_model_is_refused_with_a_warning() {
    let dir = tempfile::tempdir().expect("tempdir");
    let prompts = dir.path().join("prompts");
    std::fs::create_dir_all(prompts.join("heads")).expect("mkdir");
    let shipped = repo_root().join("prompt_guard");
    for key in ["spam", "toxic"] {
        std::fs::copy(
            shipped.join(format!("{key}.txt")),
            prompts.join(format!("{key}.txt")),
        )
        .expect("copy template");
    }
    let head = std::fs::read_to_string(shipped.join("heads/spam.json")).expect("head");
    let mut json: serde_json::Value = serde_json::from_str(&head).expect("JSON");
    json["model"]["content_hash"] = "f".repeat(64).into();
    std::fs::write(prompts.join("heads/spam.json"), json.to_string()).expect("write");
    std::fs::copy(
        shipped.join("heads/toxic.json"),
        prompts.join("heads/toxic.json"),
    )
    .expect("copy head");
    let out = check_with_templates(&prompts, "halo");
    let err = stderr(&out);
    assert!(
        err.contains("spam.json: head not used, the prompt's score decides"),
        "{err}"
    );
    assert!(err.contains("trained for encoder"), "{err}");
    let table = stdout(&out);
    let line = |key: &str| {
        table
            .lines()
            .find(|l| l.starts_with(key))
            .map(str::to_string)
            .expect(key)
    };
    assert!(line("spam").contains("prompt"), "{table}");
    assert!(line("toxic").contains("head"), "{table}");
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn training_is_deterministic_end_to_end() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = repo_root().join("crates/aegis-cli/tests/fixtures/train-small.jsonl");
    let train = |out: &str, extra: &[&str]| {
        let out_dir = dir.path().join(out);
        let mut args = vec![
            "toxic",
            "--data",
            data.to_str().expect("path"),
            "--folds",
            "3",
            "--encoder",
            "decoder",
            "--layers",
            "6,8+10",
            "--out",
            out_dir.to_str().expect("path"),
        ];
        args.extend_from_slice(extra);
        let result = train(dir.path(), &args);
        assert!(stdout(&result).contains("toxic"), "{}", stdout(&result));
        std::fs::read(out_dir.join("toxic.json")).expect("head written")
    };
    let first = train("a", &[]);
    let again = train("b", &["--no-cache"]);
    assert_eq!(first, again, "same data, same model, same bits");
    let head: serde_json::Value = serde_json::from_slice(&first).expect("JSON");
    assert_eq!(head["validator"], "toxic");
    assert_eq!(head["training"]["rows"], 12);
    let layers: Vec<u64> = head["features"]["layers"]
        .as_array()
        .expect("layers")
        .iter()
        .filter_map(serde_json::Value::as_u64)
        .collect();
    assert!(layers == [6] || layers == [8, 10], "{layers:?}");
    assert_eq!(
        head["weights"].as_array().map(Vec::len),
        Some(640 * layers.len())
    );
}

/// Rows from several sources are validated by holding whole sources out: the report leads with
/// that figure, shows the random-fold one beside it, and says what each source scores.
#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn training_reports_held_out_sources_first() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fixture = repo_root().join("crates/aegis-cli/tests/fixtures/train-small.jsonl");
    let text = std::fs::read_to_string(fixture).expect("fixture");
    // Three sources, each with insults and benign rows.
    let rows: Vec<String> = text
        .lines()
        .enumerate()
        .map(|(i, line)| {
            let mut row: serde_json::Value = serde_json::from_str(line).expect("row");
            row["source"] = format!("source-{}", i % 3).into();
            row.to_string()
        })
        .collect();
    let data = dir.path().join("sources.jsonl");
    std::fs::write(&data, rows.join("\n")).expect("write");
    let out = train(
        dir.path(),
        &[
            "toxic",
            "--data",
            data.to_str().expect("path"),
            "--encoder",
            "decoder",
            "--layers",
            "6",
            "--folds",
            "3",
            "--dry-run",
        ],
    );
    let report = stdout(&out);
    assert!(report.contains("held-out sources"), "{report}");
    let header = report
        .lines()
        .find(|l| l.starts_with("validator"))
        .expect("a table header");
    let (sources, random) = (
        header.find("sources").expect("sources column"),
        header.find("random").expect("random column"),
    );
    assert!(sources < random, "held-out sources lead: {header}");
    for source in ["source-0", "source-1", "source-2"] {
        assert!(
            report.lines().any(|l| l.trim_start().starts_with(source)),
            "{source} in the per-source table: {report}"
        );
    }
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn reviews_join_the_training_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    let history = aegis_scratch_db::ScratchDatabase::new_blocking();
    let db_arg = history.arg();
    let db_arg = db_arg.as_str();
    let checked = aegis(&[
        "check",
        "--db",
        db_arg,
        "--json",
        "Kamu jelek sekali hari ini",
    ]);
    assert!(
        checked.status.code().is_some_and(|c| c < 2),
        "{}",
        stderr(&checked)
    );
    let review = aegis(&[
        "history",
        "--db",
        db_arg,
        "review",
        "1",
        "--overturn",
        "--validator",
        "toxic=overturn",
        "--reviewer",
        "rina",
    ]);
    assert!(review.status.success(), "{}", stderr(&review));
    let data = repo_root().join("crates/aegis-cli/tests/fixtures/train-small.jsonl");
    let out = train(
        dir.path(),
        &[
            "toxic",
            "--data",
            data.to_str().expect("path"),
            "--from-reviews",
            "--db",
            db_arg,
            "--folds",
            "3",
            "--dry-run",
        ],
    );
    assert!(
        stderr(&out).contains("1 reviewed messages from history"),
        "{}",
        stderr(&out)
    );
    let all = stdout(&out)
        .lines()
        .find(|l| l.starts_with("toxic ") && l.contains(" all "))
        .map(str::to_string)
        .expect("the report has a toxic/all line");
    let rows: Vec<&str> = all.split_whitespace().collect();
    assert_eq!(rows[2], "13", "12 fixture rows and the reviewed one: {all}");
}

/// The shipped heads read EmbeddingGemma; the 270M's own heads ship beside them in
/// `heads/decoder/`: `--encoder decoder` runs them at the thresholds tuned with them, and a
/// decoder head put where the encoder's heads live is refused with the way out, the prompt
/// deciding instead.
#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn each_reader_runs_its_own_heads_and_refuses_the_others() {
    let out = aegis(&[
        "check",
        "--no-history",
        "--encoder",
        "decoder",
        "dasar goblok kamu anjing",
    ]);
    assert!(out.status.code().is_some_and(|c| c < 2), "{}", stderr(&out));
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    let decoder_head: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("prompt_guard/heads/decoder/toxic.json"))
            .expect("the decoder's toxic head"),
    )
    .expect("JSON");
    let tuned = decoder_head["training"]["threshold"]
        .as_f64()
        .expect("a tuned threshold");
    let table = stdout(&out);
    let toxic = table_row(&table, "toxic");
    assert_eq!(toxic[2], "head", "{table}");
    assert_eq!(toxic[5], "FAILED", "{table}");
    let threshold: f64 = toxic[4].parse().expect("threshold");
    assert!((threshold - tuned).abs() < 1e-6, "{threshold} vs {tuned}");

    let dir = tempfile::tempdir().expect("tempdir");
    let prompts = dir.path().join("prompts");
    std::fs::create_dir_all(prompts.join("heads")).expect("mkdir");
    let shipped = repo_root().join("prompt_guard");
    for key in ["spam", "toxic", "harassment", "financial_advice"] {
        std::fs::copy(
            shipped.join(format!("{key}.txt")),
            prompts.join(format!("{key}.txt")),
        )
        .expect("copy template");
        std::fs::copy(
            shipped.join(format!("heads/decoder/{key}.json")),
            prompts.join(format!("heads/{key}.json")),
        )
        .expect("copy head");
    }
    let out = check_with_templates(&prompts, "halo kak, apa kabar?");
    assert!(out.status.code().is_some_and(|c| c < 2), "{}", stderr(&out));
    let warnings = stderr(&out);
    assert_eq!(
        warnings
            .matches("reads the model's hidden states, but the heads read embeddinggemma-300m")
            .count(),
        4,
        "{warnings}"
    );
    assert!(
        warnings.contains("aegis train --encoder embeddinggemma"),
        "{warnings}"
    );
    let table = stdout(&out);
    assert_eq!(table.matches(" head ").count(), 0, "{table}");
    assert_eq!(table.matches(" prompt   ").count(), 4, "{table}");
}

/// A head on an encoder layer (the verdict's reading stops there) is trained, written with its
/// layer, and decides a check read through that layer only.
#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn an_encoder_head_on_an_intermediate_layer_is_trained_and_decides() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (prompts, data) = toxic_alone(dir.path());
    let out = train(
        dir.path(),
        &[
            "toxic",
            "--data",
            data.to_str().expect("path"),
            "--folds",
            "3",
            "--layers",
            "4",
            "--prompts",
            prompts.to_str().expect("path"),
        ],
    );
    // One candidate is not screened: the report names it as the chosen layers.
    assert!(stdout(&out).contains("layers 4, alpha"), "{}", stdout(&out));
    let head: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(prompts.join("heads/toxic.json")).expect("head written"),
    )
    .expect("JSON");
    assert_eq!(head["features"]["encoder"], "embeddinggemma");
    assert_eq!(head["features"]["layers"], serde_json::json!([4]));
    assert_eq!(head["weights"].as_array().map(Vec::len), Some(768));

    let out = check_with_templates(&prompts, "dasar goblok kamu anjing");
    assert!(out.status.code().is_some_and(|c| c < 2), "{}", stderr(&out));
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    let table = stdout(&out);
    assert_eq!(table_row(&table, "toxic")[2], "head", "{table}");
}

/// `--attention` trains a query over the token states beside the head and says whether held-out
/// folds kept it; a kept one is in the head's file and decides verdicts, and either way the head
/// is usable. It needs the embedding as the head's only candidate.
#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn an_attention_query_is_trained_and_kept_only_where_held_out_folds_say() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (prompts, data) = toxic_alone(dir.path());
    let args = [
        "toxic",
        "--data",
        data.to_str().expect("path"),
        "--folds",
        "3",
        "--layers",
        "embedding",
        "--attention",
        "toxic",
        "--prompts",
        prompts.to_str().expect("path"),
    ];
    let out = train(dir.path(), &args);
    let said = stderr(&out);
    assert!(
        said.contains("toxic: attention query, held-out ROC AUC over 3 folds"),
        "{said}"
    );
    let head: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(prompts.join("heads/toxic.json")).expect("head written"),
    )
    .expect("JSON");
    match head.get("pooling") {
        Some(pooling) => {
            assert!(said.contains("kept: the head pools"), "{said}");
            assert_eq!(pooling["query"].as_array().map(Vec::len), Some(768));
        }
        None => assert!(said.contains("not kept"), "{said}"),
    }
    let checked = check_with_templates(&prompts, "Goblok banget sih kamu");
    assert_eq!(
        table_row(&stdout(&checked), "toxic")[2],
        "head",
        "{}",
        stderr(&checked)
    );

    let on_layers = [&args[..6], &["4", "--attention", "toxic"], &args[9..]].concat();
    let said = refused_training(dir.path(), &on_layers);
    assert!(
        said.contains("its only candidate is the embedding"),
        "{said}"
    );
}
