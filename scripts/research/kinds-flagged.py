#!/usr/bin/env python3
"""Per kind and language, the share of a held-back set each validator flags (issue 64): reports
and quotes of abuse, untargeted profanity, civil criticism and group mentions should pass; polite
contempt should fail. Prints the team's own held-back sets and the independent ones (written from
a brief by a writer who never saw a training row) side by side, so every candidate is read on
both.

    cargo build -p aegis-cli
    scripts/research/kinds-flagged.py [--aegis target/debug/aegis] [--prompts prompt_guard] [FILE ...]

Default files: docs/held-back/independent/*.jsonl (independent; pass independent-2/, -3/ or -4/
*.jsonl for the later sets, each read by the candidates docs/held-back/README.md names) and, as
the team's own, docs/held-back/{kinds,exclamation,contempt}-holdout*.jsonl.
"""
import argparse
import collections
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HELD = ROOT / "docs/held-back"
VALIDATORS = ("toxic", "harassment")
# HateCheck's functionalities (scripts/research/hatecheck-rows.py) pooled into the kinds.
FUNCTIONAL_KIND = {
    "counter_quote_nh": "report-quoted", "counter_ref_nh": "report-quoted",
    "profanity_nh": "untargeted-profanity", "slur_homonym_nh": "other-sense",
    "ident_neutral_nh": "group-mention", "ident_pos_nh": "group-mention",
    "negate_neg_nh": "group-mention", "target_obj_nh": "abuse-of-things",
    "target_indiv_nh": "abuse-of-a-person", "target_group_nh": "abuse-of-a-group",
}


def rows(path):
    return [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]


def failed_steps(aegis, prompts, path):
    """Each row's failed validators, in file order."""
    out = subprocess.run([aegis, "check", "--file", str(path), "--json", "--no-history",
                          "--prompts", str(prompts)], capture_output=True, text=True)
    if out.returncode not in (0, 1):
        sys.exit(f"aegis check --file {path} failed:\n{out.stderr[-3000:]}")
    failed = {}
    for line in out.stdout.splitlines():
        if line.strip():
            v = json.loads(line)
            failed[v["line"]] = {s["step"] for s in v["execution_per_step"] if s["status"] == "failed"}
    return [failed.get(i + 1, set()) for i in range(len(rows(path)))]


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--aegis", default=str(ROOT / "target/debug/aegis"))
    parser.add_argument("--prompts", default=str(ROOT / "prompt_guard"))
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()
    files = [Path(f) for f in args.files] or (
        sorted((HELD / "independent").glob("*.jsonl"))
        + [HELD / "kinds-holdout.jsonl", HELD / "exclamation-holdout.jsonl"]
        + sorted(HELD.glob("contempt-holdout*.jsonl")))
    # (origin, kind, lang) -> [rows, toxic, harassment, any]; positives are counted as caught.
    table = collections.defaultdict(lambda: [0, 0, 0, 0, None])
    for path in files:
        for row, failed in zip(rows(path), failed_steps(args.aegis, args.prompts, path)):
            # independent/, independent-2/, ...: each folder is its own writer.
            origin = path.parent.name if path.parent.name.startswith("independent") else "own"
            kind = row.get("kind", "?")
            if row.get("source") in ("hatecheck", "seahatecheck"):
                origin = row["source"]
                kind = FUNCTIONAL_KIND.get(kind, "hate" if kind.endswith("_h") else kind)
            cell = table[(origin, kind, row["lang"])]
            cell[0] += 1
            cell[1] += "toxic" in failed
            cell[2] += "harassment" in failed
            cell[3] += bool(failed & set(VALIDATORS))
            cell[4] = bool(row["labels"].get("toxic") or row["labels"].get("harassment"))
    print(f"{'origin':<12} {'kind':<22} {'lang':<4} {'rows':>5} {'toxic':>7} {'harass':>7} {'any':>7}  (violating kinds: caught)")
    for (origin, kind, lang), (n, t, h, a, violating) in sorted(table.items()):
        pct = lambda k: f"{k / n:.0%}"
        print(f"{origin:<12} {kind:<22} {lang:<4} {n:>5} {pct(t):>7} {pct(h):>7} {pct(a):>7}"
              + ("  caught" if violating else ""))


if __name__ == "__main__":
    main()
