#!/usr/bin/env python3
"""ROC AUC per validator of `aegis check --file` output against a labelled JSONL set.

    head -n 200 dev.jsonl > sample.jsonl
    aegis check --file sample.jsonl > results.jsonl
    python3 scripts/roc_auc.py sample.jsonl results.jsonl

Labels follow the evaluation schema ({"labels": {"spam": true|false|null, ...}}); nulls are
ignored. A stopgap until `aegis eval` exists; standard library only.
"""
import json
import sys


def auc(pairs):
    """Mann-Whitney: P(score of a positive > score of a negative), ties counting half."""
    pos = [s for s, y in pairs if y]
    neg = [s for s, y in pairs if not y]
    if not pos or not neg:
        return None, len(pos), len(neg)
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg)), len(pos), len(neg)


def main(labelled_path, results_path):
    with open(labelled_path) as f:
        labelled = {i + 1: json.loads(line) for i, line in enumerate(f) if line.strip()}
    with open(results_path) as f:
        results = [json.loads(line) for line in f if line.strip()]
    keys = list(results[0]["scores"].keys()) if results else []
    print(f"{'validator':<18} {'lang':<4} {'ROC AUC':>8} {'pos':>5} {'neg':>5}")
    for key in keys:
        for lang in (None, "id", "en"):
            pairs = []
            for r in results:
                row = labelled[r["line"]]
                label = row["labels"].get(key)
                if label is None or (lang and row.get("lang") != lang):
                    continue
                pairs.append((r["scores"][key], label))
            value, npos, nneg = auc(pairs)
            shown = "n/a" if value is None else f"{value:.3f}"
            print(f"{key:<18} {lang or 'all':<4} {shown:>8} {npos:>5} {nneg:>5}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
