#!/usr/bin/env python3
"""The learning curve of a validator taught from examples (issues 47 and 66), on a policy the
project never shipped (docs/examples/gambling/, or docs/examples/medical/ with --policy medical):
how many near misses it flags and how many promotions it
catches on the held-apart set, against the number of labels, when the author labels

  positives   the 30 positives only;
  random      the positives and 30 pool messages drawn at random;
  active      the positives and 3 rounds of 10 pool messages `aegis examples suggest` chose,

each label the one pool.jsonl gives (the author's answer, replayed). Every condition starts from a
fresh templates folder and database; heads train on the shipped data as negatives, as the
README's path does, with the benign budget's threshold (--tune-thresholds). Also reports the
share of prompt_guard/heads/benign-real-holdout.jsonl the validator flags.

    cargo build --release -p aegis-cli
    scripts/research/teach-curve.py [--aegis target/release/aegis] [--conditions positives,random,active]
        [--policy gambling|medical|drugs] [--held-apart FILE]

Gambling: held-apart.jsonl was read by session 23's conditions and one rejected variant;
held-apart-2.jsonl was written before any later candidate was tried, and is its default.
Medical (issue 66): held-apart.jsonl was written by a writer who never saw positives.jsonl or
pool.jsonl, before any candidate ran (docs/examples/medical/HELD-APART.md).
Drugs (issue 66): the same, written 2026-11-30 and committed before its first run
(docs/examples/drugs/HELD-APART.md).
"""
import argparse
import collections
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Each policy: its validator's key, its folder, and its default held-apart set.
POLICIES = {
    "gambling": ("gambling_promotion", ROOT / "docs/examples/gambling", "held-apart-2.jsonl"),
    "medical": ("medical_misinformation", ROOT / "docs/examples/medical", "held-apart.jsonl"),
    "drugs": ("illegal_drug_sales", ROOT / "docs/examples/drugs", "held-apart.jsonl"),
}
KEY, EXAMPLES, _ = POLICIES["gambling"]
HELD_APART = None
VERBOSE = False
SHIPPED = ["dev-permissive", "train-1", "train-2", "authored", "authored-benign", "benign-real"]


def rows(path):
    return [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]


class Run:
    def __init__(self, aegis, work):
        self.aegis, self.work = aegis, work
        self.prompts = work / "prompts"
        shutil.copytree(ROOT / "prompt_guard", self.prompts)
        shutil.copy(EXAMPLES / f"{KEY}.txt", self.prompts / f"{KEY}.txt")
        self.db = work / "history.db"
        self.labels = 0

    def call(self, *args):
        command = [str(self.aegis), *args]
        result = subprocess.run(command, capture_output=True, text=True,
                                env={**os.environ, "AEGIS_DB": str(self.db)})
        if result.returncode not in (0, 1):
            sys.exit(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")
        self.stderr = result.stderr
        return result.stdout

    def label(self, items, suggested=False):
        """Teaches `items` as the author labels them; `suggested` ones as labels on messages the
        queue chose (`--suggested`), as the Teach view's labelling queue records them."""
        path = self.work / f"labels-{self.labels}.jsonl"
        with open(path, "w", encoding="utf-8") as f:
            for row in items:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        self.call("examples", "import", str(path), "--validator", KEY,
                  *(["--suggested"] if suggested else []))
        self.labels += len(items)

    def train(self):
        data = [arg for name in SHIPPED
                for arg in ("--data", str(self.prompts / "heads" / f"{name}.jsonl"))]
        out = self.call("train", KEY, "--examples", "--prompts", str(self.prompts), *data,
                  "--layers", "embedding", "--tune-thresholds", "--benign-budget", "0.01")
        self.warned = f"warning: {KEY}: The head may have learned the topic" in self.stderr
        if VERBOSE:
            for line in (out + self.stderr).splitlines():
                if KEY in line and any(w in line for w in ("threshold", "warning", "examples", "line")) \
                        or line.startswith("  ") and "%" in line:
                    print("  " + line, flush=True)

    def suggest(self, n):
        out = self.call("examples", "suggest", KEY, "--from", str(EXAMPLES / "pool.jsonl"),
                        "-n", str(n), "--json", "--prompts", str(self.prompts))
        return [s["text"] for s in json.loads(out)]

    def failed(self, path):
        return [failed for failed, _ in self.checked(path)]

    def checked(self, path):
        """Each row's verdict for KEY and its score (None where the row was not read)."""
        out = self.call("check", "--file", str(path), "--json", "--no-history",
                        "--prompts", str(self.prompts))
        verdicts = {}
        for line in out.splitlines():
            if line.strip():
                v = json.loads(line)
                verdicts[v["line"]] = (any(s["step"] == KEY and s["status"] == "failed"
                                           for s in v["execution_per_step"]),
                                       v.get("scores", {}).get(KEY))
        return [verdicts.get(i + 1, (False, None)) for i in range(len(rows(path)))]

    def measure(self, condition):
        held = rows(HELD_APART)
        checked = self.checked(HELD_APART)
        failed = [f for f, _ in checked]
        if VERBOSE:
            # Where else the author could have placed the line, as measured on the held-apart set.
            for t in (0.02, 0.05, 0.1, 0.2, 0.3, 0.5):
                cells = collections.defaultdict(lambda: [0, 0, 0, 0])
                for row, (_, score) in zip(held, checked):
                    cell = cells[row["lang"]]
                    hit = score is not None and score >= t
                    if row["labels"][KEY]:
                        cell[0] += hit
                        cell[1] += 1
                    else:
                        cell[2] += hit
                        cell[3] += 1
                print(f"    at {t:<5} " + "; ".join(
                    f"{lang} recall {c[0]}/{c[1]}, flagged {c[2]}/{c[3]}"
                    for lang, c in sorted(cells.items())), flush=True)
        by = collections.defaultdict(lambda: [0, 0, 0, 0])  # caught, positives, flagged, near misses
        for row, f in zip(held, failed):
            cell = by[row["lang"]]
            if row["labels"][KEY]:
                cell[0] += f
                cell[1] += 1
            else:
                cell[2] += f
                cell[3] += 1
        benign = self.failed(ROOT / "prompt_guard/heads/benign-real-holdout.jsonl")
        parts = [f"{lang}: recall {c[0]}/{c[1]}, near misses flagged {c[2]}/{c[3]} ({c[2] / c[3]:.0%})"
                 for lang, c in sorted(by.items())]
        print(f"{condition:<10} labels {self.labels:>3}  " + "; ".join(parts)
              + f"; benign-real-holdout flagged {sum(benign)}/{len(benign)} ({sum(benign) / len(benign):.1%})"
              + ("; topic warning" if self.warned else ""),
              flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--aegis", default=str(ROOT / "target/release/aegis"))
    parser.add_argument("--conditions", default="positives,random,active")
    parser.add_argument("--policy", default="gambling", choices=sorted(POLICIES))
    parser.add_argument("--held-apart", help="default: the policy's own")
    parser.add_argument("--verbose", action="store_true",
                        help="print the train's lines on the threshold, warnings and author figures")
    args = parser.parse_args()
    global HELD_APART, VERBOSE, KEY, EXAMPLES
    VERBOSE = args.verbose
    KEY, EXAMPLES, held_apart = POLICIES[args.policy]
    HELD_APART = Path(args.held_apart or EXAMPLES / held_apart)
    positives = rows(EXAMPLES / "positives.jsonl")
    pool = rows(EXAMPLES / "pool.jsonl")
    gold = {row["text"]: row for row in pool}
    for condition in args.conditions.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            run = Run(args.aegis, Path(tmp))
            run.label(positives)
            run.train()
            if condition == "positives":
                run.measure(condition)
            elif condition == "random":
                run.label(random.Random(47).sample(pool, 30))
                run.train()
                run.measure(condition)
            elif condition == "active":
                for _ in range(3):
                    chosen = [gold[text] for text in run.suggest(10)]
                    print("  suggested: " + ", ".join(
                        f"{lang} {'fail' if fails else 'pass'} {n}" for (lang, fails), n in sorted(
                            collections.Counter((r["lang"], r["labels"][KEY]) for r in chosen).items())),
                          flush=True)
                    run.label(chosen, suggested=True)
                    run.train()
                    run.measure(condition)
            else:
                sys.exit(f"unknown condition {condition}")


if __name__ == "__main__":
    main()
