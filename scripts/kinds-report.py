#!/usr/bin/env python3
"""Per-kind rates of `aegis check --file DATA --json --no-history` output on a labelled JSONL
file whose rows carry a `kind` (docs/held-back/kinds-holdout.jsonl).

A kind whose rows are all benign reports the share flagged by any validator (and by toxic); a
kind with positives reports, for each validator labelled true, the share that validator caught.

    aegis check --file DATA --json --no-history > OUT
    scripts/kinds-report.py DATA OUT
"""
import collections
import json
import sys


def main(data_path, verdicts_path):
    rows = [json.loads(line) for line in open(data_path, encoding="utf-8") if line.strip()]
    verdicts = {}
    for line in open(verdicts_path, encoding="utf-8"):
        if line.strip():
            verdict = json.loads(line)
            verdicts[verdict["line"]] = verdict
    groups = collections.defaultdict(list)
    for number, row in enumerate(rows, 1):
        if number not in verdicts:
            sys.exit(f"line {number} has no verdict in {verdicts_path}")
        failed = {
            step["step"]
            for step in verdicts[number]["execution_per_step"]
            if step["status"] == "failed"
        }
        groups[(row.get("kind", "-"), row["lang"])].append((row["labels"], failed))
    print(f"{'kind':<18} {'lang':<4} {'rows':>4}  rate")
    for (kind, lang), items in sorted(groups.items()):
        positives = sorted({v for labels, _ in items for v, l in labels.items() if l})
        if not positives:
            flagged = sum(1 for _, failed in items if failed)
            toxic = sum(1 for _, failed in items if "toxic" in failed)
            print(f"{kind:<18} {lang:<4} {len(items):>4}  flagged by any {flagged}/{len(items)}"
                  f" ({flagged / len(items):.0%}), by toxic {toxic}")
            continue
        parts = []
        for validator in positives:
            labelled = [failed for labels, failed in items if labels.get(validator)]
            caught = sum(1 for failed in labelled if validator in failed)
            parts.append(f"{validator} caught {caught}/{len(labelled)} ({caught / len(labelled):.0%})")
        print(f"{kind:<18} {lang:<4} {len(items):>4}  " + ", ".join(parts))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
