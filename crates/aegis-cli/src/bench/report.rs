//! The bench's figures as Markdown tables.

use serde_json::Value;

pub(super) fn print_report(report: &Value) {
    // GPU verdicts take milliseconds, CPU ones seconds: keep three significant digits for both.
    let ms = |v: &Value| {
        v.as_f64().map_or("—".to_string(), |x| match x {
            x if x < 10.0 => format!("{x:.2}"),
            x if x < 100.0 => format!("{x:.1}"),
            x => format!("{x:.0}"),
        })
    };
    let ratio = |a: &Value, b: &Value| match (a.as_f64(), b.as_f64()) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.1}×", a / b),
        _ => "—".into(),
    };
    println!("## Verdict latency, ms (p50 / p95)\n");
    println!("| message | tokens (msg / prompts / fast path) | (a) original | (b) separate | (c) fast | (d) llama.cpp | (e) transformers | a÷c | b÷c | d÷c | e÷c |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let lengths = report["lengths"].as_array().cloned().unwrap_or_default();
    for row in &lengths {
        let name = row["length"].as_str().unwrap_or("");
        let d = &report["llama_cpp"][name];
        let e = &report["transformers"][name];
        let cell = |t: &Value| format!("{} / {}", ms(&t["p50_ms"]), ms(&t["p95_ms"]));
        println!(
            "| {name} | {} / {} / {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            row["message_tokens"],
            row["prompt_tokens"],
            row["computed_tokens"],
            cell(&row["a_original"]),
            cell(&row["b_separate"]),
            cell(&row["c_fast"]),
            cell(d),
            cell(e),
            ratio(&row["a_original"]["p50_ms"], &row["c_fast"]["p50_ms"]),
            ratio(&row["b_separate"]["p50_ms"], &row["c_fast"]["p50_ms"]),
            ratio(&d["p50_ms"], &row["c_fast"]["p50_ms"]),
            ratio(&e["p50_ms"], &row["c_fast"]["p50_ms"]),
        );
    }
    println!("\n## Prefill rate, prompt tokens per second at p50\n");
    println!("| message | (b) separate | (d) llama.cpp | (c) fast, effective | (c) fast, tokens computed |");
    println!("|---|---|---|---|---|");
    for row in &lengths {
        let name = row["length"].as_str().unwrap_or("");
        let tokens = row["prompt_tokens"].as_f64().unwrap_or(0.0);
        let computed = row["computed_tokens"].as_f64().unwrap_or(0.0);
        let rate = |t: &Value, n: f64| {
            t["p50_ms"]
                .as_f64()
                .map_or("—".into(), |p| format!("{:.0}", n / p * 1e3))
        };
        println!(
            "| {name} | {} | {} | {} | {} |",
            rate(&row["b_separate"], tokens),
            rate(&report["llama_cpp"][name], tokens),
            rate(&row["c_fast"], tokens),
            rate(&row["c_fast"], computed),
        );
    }
    println!("\n## Throughput of (c) through the worker, short messages\n");
    println!("| clients | verdicts/s |\n|---|---|");
    for level in report["concurrency"].as_array().into_iter().flatten() {
        println!(
            "| {} | {:.2} |",
            level["clients"],
            level["verdicts_per_s"].as_f64().unwrap_or(0.0)
        );
    }
    println!("\n## Validators, short message, (c) p50 ms\n");
    println!("| validators | p50 | p95 | ÷ 4 validators |\n|---|---|---|---|");
    let counts = report["validator_counts"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let four = counts
        .first()
        .map(|c| c["latency"]["p50_ms"].clone())
        .unwrap_or(Value::Null);
    for c in &counts {
        println!(
            "| {} | {} | {} | {} |",
            c["validators"],
            ms(&c["latency"]["p50_ms"]),
            ms(&c["latency"]["p95_ms"]),
            ratio(&c["latency"]["p50_ms"], &four)
        );
    }
    let c_short = &lengths
        .first()
        .map(|r| r["c_fast"]["p50_ms"].clone())
        .unwrap_or(Value::Null);
    println!(
        "\n## Floor\n\nmatmul rate ({} layers) {:.0} GFLOP/s; the short message's fast-path work is {:.1} GFLOP, a floor of {} ms; (c) p50 is {} the floor.",
        report["matmul_of"].as_str().unwrap_or("the model's"),
        report["matmul_gflops"].as_f64().unwrap_or(0.0),
        lengths.first().and_then(|r| r["flops"].as_f64()).unwrap_or(0.0) / 1e9,
        format_args!("{:.1}", report["floor_short_ms"].as_f64().unwrap_or(0.0)),
        ratio(c_short, &report["floor_short_ms"]),
    );
    if let Some(kinds) = report["cpu_kernels"].as_array() {
        // Which product code this CPU's encoder runs, and why: figures from different CPUs are
        // compared only beside this table.
        println!("\n## CPU kernels (the encoder's products on this CPU)\n");
        println!("| kernel | weights | needs | this CPU | why |\n|---|---|---|---|---|");
        for k in kinds {
            let here = match (k["runs_for"].as_str(), k["available"].as_bool()) {
                (Some(what), _) => format!("runs {what}"),
                (_, Some(true)) => "has it".to_string(),
                _ => "lacks it".to_string(),
            };
            println!(
                "| {} | {} | {} | {here} | {} |",
                k["kind"].as_str().unwrap_or("?"),
                k["weights"].as_str().unwrap_or("?"),
                k["needs"].as_str().unwrap_or("?"),
                k["why"].as_str().unwrap_or("")
            );
        }
    }
    if let Some(lengths) = report["remote_backend"]["lengths"].as_array() {
        println!(
            "\n## Model server {} ({}), prompt-decided verdicts, ms (p50 / p95)\n",
            report["remote_backend"]["url"].as_str().unwrap_or("?"),
            report["remote_backend"]["served"].as_str().unwrap_or("?")
        );
        println!("| message | local engine | model server | server ÷ local |\n|---|---|---|---|");
        for r in lengths {
            println!(
                "| {} | {} / {} | {} / {} | {} |",
                r["length"].as_str().unwrap_or(""),
                ms(&r["local_prompts"]["p50_ms"]),
                ms(&r["local_prompts"]["p95_ms"]),
                ms(&r["remote_prompts"]["p50_ms"]),
                ms(&r["remote_prompts"]["p95_ms"]),
                format_args!("{:.2}", r["remote_over_local"].as_f64().unwrap_or(f64::NAN)),
            );
        }
    }
    println!(
        "\n## Memory\n\nRSS after load {:.0} MiB, peak RSS {:.0} MiB; prefix cache {}",
        report["rss_after_load_mib"].as_f64().unwrap_or(0.0),
        report["peak_rss_mib"].as_f64().unwrap_or(0.0),
        report["prefix_cache"]
    );
    if let Some(gpu) = report["gpu_memory_mib"].as_f64() {
        println!("GPU memory of this process (nvidia-smi, after the runs): {gpu:.0} MiB");
    }
    if let Some(peak) = report["transformers"]["peak_memory_mib"].as_f64() {
        println!("(e) transformers peak allocated GPU memory: {peak:.0} MiB");
    }
    if report["model"]["synthetic"].as_bool() == Some(true) {
        println!("\n{}", aegis_engine::SYNTHETIC_WARNING);
    }
}
