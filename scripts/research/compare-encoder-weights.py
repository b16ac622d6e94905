#!/usr/bin/env python3
"""Scores of the shipped heads under two encoder weight formats, side by side, from
`aegis check --file DATA --json --no-history --encoder-weights W` outputs of one labelled JSONL
file: ROC AUC per validator and language (rows labelled true or false), the share each format
flags, and how many messages' verdicts differ.

    for w in auto int8; do
      aegis check --file DATA --json --no-history --encoder-weights $w > OUT.$w
    done
    scripts/research/compare-encoder-weights.py DATA OUT.auto OUT.int8
"""
import collections
import json
import sys


def read_jsonl(path):
    return [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]


def auc(positives, negatives):
    """Mann-Whitney: the chance a positive outscores a negative, ties counted half."""
    if not positives or not negatives:
        return None
    ranked = sorted([(s, 1) for s in positives] + [(s, 0) for s in negatives])
    rank_sum, i = 0.0, 0
    while i < len(ranked):
        j = i
        while j < len(ranked) and ranked[j][0] == ranked[i][0]:
            j += 1
        mean_rank = (i + j + 1) / 2
        rank_sum += mean_rank * sum(1 for k in range(i, j) if ranked[k][1])
        i = j
    n_pos, n_neg = len(positives), len(negatives)
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def verdicts(path):
    out = {}
    for v in read_jsonl(path):
        failed = {s["step"] for s in v["execution_per_step"] if s["status"] == "failed"}
        out[v["line"]] = (v.get("scores", {}), failed)
    return out


def main(data_path, *outputs):
    rows = read_jsonl(data_path)
    runs = [verdicts(p) for p in outputs]
    print(f"{'validator':<17} {'lang':<4} {'pos':>4} {'neg':>5}  " +
          "  ".join(f"{'AUC ' + str(i + 1):>8} {'flag ' + str(i + 1):>7}" for i in range(len(runs))))
    groups = collections.defaultdict(lambda: [[[], []] for _ in runs])
    flagged = collections.defaultdict(lambda: [0] * len(runs))
    totals = collections.Counter()
    for number, row in enumerate(rows, 1):
        for validator, label in row["labels"].items():
            if label is None:
                continue
            key = (validator, row.get("lang", "-"))
            totals[key] += 1
            for i, run in enumerate(runs):
                scores, failed = run[number]
                if validator in scores:
                    groups[key][i][0 if label else 1].append(scores[validator])
                flagged[key][i] += validator in failed
    for key in sorted(groups):
        pos, neg = len(groups[key][0][0]), len(groups[key][0][1])
        cells = []
        for i in range(len(runs)):
            a = auc(*groups[key][i])
            cells.append(f"{'—' if a is None else f'{a:.4f}':>8} {flagged[key][i] / totals[key]:>7.1%}")
        print(f"{key[0]:<17} {key[1]:<4} {pos:>4} {neg:>5}  " + "  ".join(cells))
    if len(runs) > 1:
        differ = [n for n in range(1, len(rows) + 1)
                  if len({frozenset(run[n][1]) for run in runs}) > 1]
        any_flagged = [sum(1 for n in range(1, len(rows) + 1) if run[n][1]) for run in runs]
        print(f"\n{len(rows)} messages; flagged by any validator: " +
              ", ".join(f"{c} ({c / len(rows):.1%})" for c in any_flagged) +
              f"; verdicts differ on {len(differ)}")


if __name__ == "__main__":
    main(*sys.argv[1:])
