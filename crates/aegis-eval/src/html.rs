//! The report as one self-contained HTML file: inline styles and SVG charts, no scripts to run
//! and nothing fetched, so it opens offline and can be attached to a ticket. The report's JSON is
//! embedded too, for anyone who wants the numbers behind a chart.

use std::fmt::Write;

use crate::compare::Comparison;
use crate::metrics::{metric_text, Histogram, Metrics, METRIC_COLUMNS};
use crate::report::{EvalReport, Mistake, ValidatorReport};

const STYLE: &str = r#"
body { font: 14px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 72rem; color: #1d232a; padding: 0 1rem; }
h1 { font-size: 1.5rem; } h2 { margin-top: 2.5rem; border-bottom: 1px solid #d5dbe1; } h3 { font-size: 1rem; }
table { border-collapse: collapse; margin: .5rem 0 1rem; }
th, td { padding: .25rem .6rem; border-bottom: 1px solid #e4e8ec; text-align: right; vertical-align: top; }
th:first-child, td:first-child, td.text { text-align: left; }
td.text { max-width: 40rem; white-space: pre-wrap; word-break: break-word; }
.charts { display: flex; gap: 1.5rem; flex-wrap: wrap; }
figure { margin: 0; } figcaption { font-size: 12px; color: #56616c; text-align: center; }
.muted { color: #56616c; } .pos { fill: #c2410c; } .neg { fill: #2563eb; }
.up { color: #15803d; } .down { color: #b91c1c; }
"#;

/// Renders `report` (and a comparison with another run, when given) as an HTML document.
pub fn render(report: &EvalReport, comparison: Option<&Comparison>) -> String {
    let mut h = String::new();
    let info = &report.info;
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>AEGIS evaluation: {}</title><style>{STYLE}</style></head><body>",
        escape(&info.dataset.name)
    );
    let _ = write!(
        h,
        "<h1>Evaluation of {}</h1><p class=\"muted\">{} rows of {} (sha256 {}), model {} ({}), templates from {}.",
        escape(&info.dataset.name),
        report.rows,
        info.dataset.file_rows,
        escape(short(&info.dataset.sha256)),
        escape(&info.model.id),
        escape(short(&info.model.content_hash)),
        escape(&info.templates_from),
    );
    if let Some(seed) = info.dataset.sample.seed {
        let _ = write!(h, " Sampled with seed {seed}.");
    }
    h.push_str(" A message is flagged when its score is at or above the threshold; rows whose label is null are left out of that validator's figures.</p>");

    h.push_str("<table class=\"summary\"><thead><tr><th>validator</th><th>scored by</th><th>threshold</th><th>labelled</th><th>precision</th><th>recall</th><th>F1</th><th>ROC AUC</th><th>PR AUC</th><th>best-F1 threshold</th></tr></thead><tbody>");
    for v in &report.validators {
        let m = &v.overall;
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&v.key),
            escape(&v.scored_by),
            metric_text(Some(m.threshold)),
            m.labelled,
            metric_text(m.precision),
            metric_text(m.recall),
            metric_text(m.f1),
            metric_text(m.roc_auc),
            metric_text(m.pr_auc),
            m.best_f1
                .map(|b| format!("{} (F1 {})", metric_text(Some(b.threshold)), metric_text(Some(b.f1))))
                .unwrap_or_else(|| "–".into()),
        );
    }
    h.push_str("</tbody></table>");

    if let Some(c) = comparison {
        comparison_section(&mut h, c);
    }
    for v in &report.validators {
        validator_section(&mut h, v);
    }
    if !report.errors.is_empty() {
        let _ = write!(
            h,
            "<h2 id=\"errors\">Rows without a verdict ({})</h2><table><thead><tr><th>row</th><th>id</th><th>error</th></tr></thead><tbody>",
            report.errors.len()
        );
        for e in &report.errors {
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td class=\"text\">{}</td></tr>",
                e.row,
                escape(e.id.as_deref().unwrap_or("")),
                escape(&e.message)
            );
        }
        h.push_str("</tbody></table>");
    }
    // JSON inside a script element only ends at "</": escaping the slash keeps it inert.
    let json =
        serde_json::to_string(&serde_json::json!({ "report": report, "comparison": comparison }))
            .unwrap_or_else(|_| "null".into())
            .replace("</", "<\\/");
    let _ = writeln!(
        h,
        "<script type=\"application/json\" id=\"report-data\">{json}</script></body></html>"
    );
    h
}

fn validator_section(h: &mut String, v: &ValidatorReport) {
    let _ = write!(
        h,
        "<section class=\"validator\" id=\"validator-{key}\"><h2>{name} <span class=\"muted\">({key}, scored by {by})</span></h2>",
        key = escape(&v.key),
        name = escape(&v.name),
        by = escape(&v.scored_by)
    );
    h.push_str("<table class=\"metrics\"><thead><tr><th>language</th>");
    for column in METRIC_COLUMNS {
        let _ = write!(h, "<th>{column}</th>");
    }
    h.push_str("</tr></thead><tbody>");
    metrics_row(h, "all", &v.overall);
    for (lang, m) in &v.by_language {
        metrics_row(h, lang, m);
    }
    let _ = write!(
        h,
        "</tbody></table><p class=\"muted\">{} evaluated rows have no label for this validator.</p>",
        v.unlabelled
    );
    h.push_str("<div class=\"charts\">");
    line_chart(
        h,
        "roc",
        "ROC curve",
        "false-positive rate",
        "true-positive rate",
        &v.curves.roc,
        true,
    );
    line_chart(
        h,
        "pr",
        "Precision-recall curve",
        "recall",
        "precision",
        &v.curves.pr,
        false,
    );
    histogram_chart(h, &v.histogram, v.overall.threshold);
    h.push_str("</div>");
    mistakes_table(
        h,
        "false-positives",
        "Most confident false positives",
        &v.worst_false_positives,
    );
    mistakes_table(
        h,
        "false-negatives",
        "Most confident false negatives",
        &v.worst_false_negatives,
    );
    h.push_str("</section>");
}

fn metrics_row(h: &mut String, label: &str, m: &Metrics) {
    h.push_str("<tr><td>");
    h.push_str(&escape(label));
    for cell in m.cells() {
        let _ = write!(h, "</td><td>{}", escape(&cell));
    }
    h.push_str("</td></tr>");
}

const SIZE: f64 = 220.0;
const MARGIN: f64 = 36.0;

fn plot_x(x: f64) -> f64 {
    MARGIN + x.clamp(0.0, 1.0) * SIZE
}

fn plot_y(y: f64) -> f64 {
    MARGIN / 2.0 + (1.0 - y.clamp(0.0, 1.0)) * SIZE
}

fn chart_open(h: &mut String, class: &str, x_label: &str, y_label: &str) {
    let (w, ht) = (SIZE + MARGIN * 1.5, SIZE + MARGIN * 1.5);
    let _ = write!(
        h,
        "<figure><svg class=\"{class}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{ht}\" viewBox=\"0 0 {w} {ht}\" role=\"img\">\
<rect x=\"{x0}\" y=\"{y0}\" width=\"{SIZE}\" height=\"{SIZE}\" fill=\"none\" stroke=\"#aab4be\"/>\
<text x=\"{cx}\" y=\"{by}\" font-size=\"11\" text-anchor=\"middle\">{x_label}</text>\
<text x=\"10\" y=\"{cy}\" font-size=\"11\" text-anchor=\"middle\" transform=\"rotate(-90 10 {cy})\">{y_label}</text>",
        x0 = plot_x(0.0),
        y0 = plot_y(1.0),
        cx = plot_x(0.5),
        by = plot_y(0.0) + 28.0,
        cy = plot_y(0.5),
    );
}

fn line_chart(
    h: &mut String,
    class: &str,
    title: &str,
    x_label: &str,
    y_label: &str,
    points: &[(f64, f64)],
    diagonal: bool,
) {
    chart_open(h, class, x_label, y_label);
    if diagonal {
        let _ = write!(
            h,
            "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#d5dbe1\" stroke-dasharray=\"4 3\"/>",
            plot_x(0.0),
            plot_y(0.0),
            plot_x(1.0),
            plot_y(1.0)
        );
    }
    if points.is_empty() {
        let _ = write!(
            h,
            "<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\">needs both classes</text>",
            plot_x(0.5),
            plot_y(0.5)
        );
    } else {
        let path: Vec<String> = points
            .iter()
            .map(|&(x, y)| format!("{:.2},{:.2}", plot_x(x), plot_y(y)))
            .collect();
        let _ = write!(
            h,
            "<polyline fill=\"none\" stroke=\"#1d4ed8\" stroke-width=\"2\" points=\"{}\"/>",
            path.join(" ")
        );
    }
    let _ = write!(h, "</svg><figcaption>{title}</figcaption></figure>");
}

fn histogram_chart(h: &mut String, histogram: &Histogram, threshold: f64) {
    chart_open(h, "histogram", "score", "share of class");
    let bins = histogram.positives.len().max(1);
    let width = SIZE / bins as f64;
    for (counts, class, offset) in [
        (&histogram.negatives, "neg", 0.0),
        (&histogram.positives, "pos", 0.5),
    ] {
        let total: usize = counts.iter().sum();
        if total == 0 {
            continue;
        }
        for (i, &count) in counts.iter().enumerate() {
            let share = count as f64 / total as f64;
            let top = plot_y(share);
            let _ = write!(
                h,
                "<rect class=\"{class}\" x=\"{:.2}\" y=\"{top:.2}\" width=\"{:.2}\" height=\"{:.2}\" opacity=\"0.75\"><title>{class}: {count}</title></rect>",
                plot_x(i as f64 / bins as f64) + offset * width,
                width / 2.0,
                plot_y(0.0) - top,
            );
        }
    }
    let _ = write!(
        h,
        "<line x1=\"{x:.2}\" y1=\"{}\" x2=\"{x:.2}\" y2=\"{}\" stroke=\"#111\" stroke-dasharray=\"3 2\"/></svg><figcaption>Scores: <span style=\"color:#c2410c\">positives</span> vs <span style=\"color:#2563eb\">negatives</span>, threshold dashed</figcaption></figure>",
        plot_y(1.0),
        plot_y(0.0),
        x = plot_x(threshold),
    );
}

fn mistakes_table(h: &mut String, class: &str, title: &str, mistakes: &[Mistake]) {
    let _ = write!(h, "<h3>{title}</h3>");
    if mistakes.is_empty() {
        h.push_str("<p class=\"muted\">None.</p>");
        return;
    }
    let _ = write!(
        h,
        "<table class=\"{class}\"><thead><tr><th>row</th><th>id</th><th>lang</th><th>score</th><th>text</th></tr></thead><tbody>"
    );
    for m in mistakes {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"text\">{}</td></tr>",
            m.row,
            escape(m.id.as_deref().unwrap_or("")),
            escape(&m.lang),
            metric_text(Some(m.score)),
            escape(&m.text)
        );
    }
    h.push_str("</tbody></table>");
}

fn comparison_section(h: &mut String, c: &Comparison) {
    let _ = write!(
        h,
        "<h2 id=\"comparison\">Compared with {}</h2><p class=\"muted\">Change from the baseline ({}) to this run ({}); fixed and broken count flipped verdicts that now agree or disagree with the label.</p>",
        escape(&c.baseline),
        escape(&c.baseline),
        escape(&c.candidate)
    );
    h.push_str("<table class=\"deltas\"><thead><tr><th>validator</th><th>Δ precision</th><th>Δ recall</th><th>Δ F1</th><th>Δ ROC AUC</th><th>Δ PR AUC</th><th>fixed</th><th>broken</th></tr></thead><tbody>");
    for d in &c.deltas {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&d.key),
            signed(d.precision),
            signed(d.recall),
            signed(d.f1),
            signed(d.roc_auc),
            signed(d.pr_auc),
            d.fixed,
            d.broken
        );
    }
    let _ = write!(
        h,
        "</tbody></table><h3>Flipped verdicts ({})</h3><table class=\"flips\"><thead><tr><th>validator</th><th>row</th><th>label</th><th>baseline</th><th>this run</th><th>text</th></tr></thead><tbody>",
        c.flips.len()
    );
    for f in &c.flips {
        let label = match f.label {
            Some(true) => "violation",
            Some(false) => "fine",
            None => "–",
        };
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{label}</td><td>{}{}</td><td>{}{}</td><td class=\"text\">{}</td></tr>",
            escape(&f.validator),
            f.row,
            metric_text(Some(f.baseline_score)),
            if f.baseline_flagged { " flagged" } else { "" },
            metric_text(Some(f.candidate_score)),
            if f.candidate_flagged { " flagged" } else { "" },
            escape(&f.text)
        );
    }
    h.push_str("</tbody></table>");
}

fn signed(v: Option<f64>) -> String {
    match v {
        Some(v) if v > 0.0005 => format!("<span class=\"up\">{v:+.3}</span>"),
        Some(v) if v < -0.0005 => format!("<span class=\"down\">{v:+.3}</span>"),
        Some(v) => format!("{v:+.3}"),
        None => "–".into(),
    }
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}
