"""Per-validator ROC AUC and errors of `aegis check --conversation` output against the labels of
the conversations it read (docs/conversations/held-out.jsonl by default).

    aegis check --conversation FILE --no-history --context-reading R > OUT.jsonl
    python3 scripts/research/conversation_auc.py OUT.jsonl [FILE]
"""
import json
import sys

KEYS = ["spam", "toxic", "harassment", "financial_advice"]


def auc(pos, neg):
    if not pos or not neg:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def main():
    out = sys.argv[1]
    data = sys.argv[2] if len(sys.argv) > 2 else "docs/conversations/held-out.jsonl"
    convs = [json.loads(l) for l in open(data, encoding="utf-8") if l.strip()]
    results = [json.loads(l) for l in open(out, encoding="utf-8") if l.strip()]
    by_line = {r["line"]: r for r in results}
    for key in KEYS:
        pos, neg, wrong = [], [], []
        for line, conv in enumerate(convs, start=1):
            r = by_line.get(line)
            if r is None or key not in r["scores"]:
                continue
            label = conv["labels"].get(key)
            if label is None:
                continue
            score = r["scores"][key]
            failed = any(s["step"] == key and s["status"] == "failed" for s in r["execution_per_step"])
            (pos if label else neg).append(score)
            if failed != label:
                wrong.append(f'{conv["id"]} {score:.2f}')
        a = auc(pos, neg)
        print(f"{key:18} auc {a if a is None else round(a, 3)!s:6} pos {len(pos):2} neg {len(neg):2} wrong: {', '.join(wrong)}")


if __name__ == "__main__":
    main()
