#!/usr/bin/env python3
"""Held-out ROC AUC of two `aegis train` runs on the rows they share (issue 64).

`aegis train` prints each validator's out-of-fold ROC AUC per language over every row it trained
on, so a candidate that adds rows of a hard kind (contempt without a rude word, say) reads lower
there by what it added, not by what it learned. This reads the out-of-fold scores each run wrote
with `--scores-out FILE` and compares the two on the rows both trained on with the same label
(matched by validator and text), per validator and language, and on the public sources' rows
alone (groups not written by the project: every `aegis_*` group left out). `--by-source` adds
each public source on its own (the rows of one source, ranked among themselves): the pooled
public figure mixes sources whose scores sit at different heights, so a fall inside one source
can hide behind the pooling.

    target/release/aegis train ... --scores-out BASE.jsonl     # the shipped data
    target/release/aegis train ... --scores-out CAND.jsonl     # the candidate's
    scripts/research/compare-scores.py BASE.jsonl CAND.jsonl

Folds still move: new sources deal the old ones into folds anew, so a difference of a few
thousandths is within what the split alone does.
"""
import argparse
import bisect
import collections
import json


def read(path):
    """(validator, text) -> (label, score, lang, group)."""
    rows = {}
    for line in open(path, encoding="utf-8"):
        if line.strip():
            r = json.loads(line)
            rows[(r["validator"], r["text"])] = (r["label"], r["score"], r["lang"], r["group"])
    return rows


def roc_auc(pairs):
    """ROC AUC of (label, score) pairs, ties counted half; None without both classes."""
    pos = [s for label, s in pairs if label]
    neg = sorted(s for label, s in pairs if not label)
    if not pos or not neg:
        return None
    wins = sum(bisect.bisect_left(neg, p) + (bisect.bisect_right(neg, p)
                                             - bisect.bisect_left(neg, p)) / 2 for p in pos)
    return wins / (len(pos) * len(neg))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("base")
    parser.add_argument("candidate")
    parser.add_argument("--by-source", action="store_true",
                        help="also each public source's rows on their own")
    args = parser.parse_args()
    base, cand = read(args.base), read(args.candidate)
    shared = [k for k in base if k in cand and base[k][0] == cand[k][0]]
    cells = collections.defaultdict(lambda: ([], []))
    for key in shared:
        validator = key[0]
        label, _, lang, group = base[key]
        scopes = ["all", lang]
        if not group.startswith("aegis_"):
            scopes += ["public", f"public {lang}"]
            if args.by_source:
                # A group's name is the source then its provenance in brackets.
                scopes.append(group.split(" ")[0])
        for scope in scopes:
            cells[(validator, scope)][0].append((label, base[key][1]))
            cells[(validator, scope)][1].append((label, cand[key][1]))
    only_cand = sum(1 for k in cand if k not in base)
    print(f"{len(shared)} rows in both runs; {only_cand} only in the candidate's")
    print(f"{'validator':<12} {'rows':<24} {'n':>6} {'pos':>5} {'base':>7} {'cand':>7} {'diff':>7}")
    for (validator, scope), (b, c) in sorted(cells.items()):
        ab, ac = roc_auc(b), roc_auc(c)
        if ab is None or ac is None:
            continue
        positives = sum(1 for label, _ in b if label)
        print(f"{validator:<12} {scope:<24} {len(b):>6} {positives:>5} {ab:>7.4f} {ac:>7.4f} "
              f"{ac - ab:>+7.4f}")


if __name__ == "__main__":
    main()
