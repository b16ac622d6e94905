#!/usr/bin/env python3
"""Writes HateCheck's validated test cases (3,647 of its 3,728: reclaimed slurs are left out) (Röttger et al. 2021, CC BY 4.0,
github.com/paul-rottger/hatecheck-data, `test_suite_cases.csv`) in the evaluation schema, with the
labels this project's validators decide (issue 64, item 2: writing by other people for the hard
kinds, English).

HateCheck labels hate against protected groups. Our toxic validator decides abuse aimed at any
person or group, and harassment abuse aimed at the reader or a named person, so the mapping is:

- every hateful functionality (`*_h`): toxic true; harassment true where HateCheck marks the case
  `directed` (it addresses the reader: "immigrant vermin like you"), unknown where `general`;
- `target_indiv_nh` (abuse of one person with no group named, "You are disgusting"): toxic and
  harassment true, which HateCheck calls non-hateful only because no protected group is named;
- `target_group_nh` (abuse of a group that is not protected, "Data scientists are a waste of
  space"): toxic true, harassment unknown;
- `slur_reclaimed_nh` (a group's own use of a slur): left out, as a chat assistant's moderators
  would not agree on it and the row would label nothing;
- the other non-hateful functionalities (counter-speech that quotes or names the abuse, profanity
  aimed at no one, neutral and positive mentions of groups, negated hate, slur homonyms, abuse of
  objects): all four false.

Spam and financial advice are unknown throughout: HateCheck does not say, and a row with every
label false is read as ordinary traffic, whose share flagged sets each threshold (the benign
budget); these are near misses written to be hard, which the heads learn from as negatives but
which must not move the line ordinary messages are held to. Each row keeps HateCheck's
functionality as its `kind` and its case id in `id` (`hatecheck:<case_id>`).

SEAHateCheck's Indonesian cases (Social-AI-Studio/SEAHateCheck, `dataset/gold_label_all/id.csv`:
HateCheck's templates translated and localised; `dataset/silver_label_all/id.csv`: written by an
LLM from them) are read the same way, with `--sample N` drawing at most N cases of each
functionality (seed 64). Its repository states no licence, so its rows are only measured on, never
committed or trained on (docs/guide/src/lab/contempt.md, "Writing by other people").

    scripts/research/hatecheck-rows.py test_suite_cases.csv > docs/experiments/other-writers/hatecheck.jsonl
    scripts/research/hatecheck-rows.py --sample 40 id.csv > /tmp/seahatecheck-id.jsonl
"""
import argparse
import collections
import csv
import json
import random
import sys
from pathlib import Path

ALL_FALSE = {"counter_quote_nh", "counter_ref_nh", "profanity_nh", "ident_neutral_nh",
             "ident_pos_nh", "negate_neg_nh", "slur_homonym_nh", "target_obj_nh"}


def labels(functionality, direction):
    if functionality.endswith("_h"):
        return True, (True if direction == "directed" else None)
    if functionality == "target_indiv_nh":
        return True, True
    if functionality == "target_group_nh":
        return True, None
    if functionality == "slur_reclaimed_nh":
        return None, None
    if functionality in ALL_FALSE:
        return False, False
    sys.exit(f"unmapped functionality {functionality!r}")


def cases(path):
    """(key, text, functionality, direction, lang, source) per case, in file order."""
    with open(path, encoding="utf-8", newline="") as f:
        table = list(csv.DictReader(f))
    columns = set(table[0]) if table else set()
    if "test_case" in columns:  # HateCheck
        return [(c["case_id"], c["test_case"], c["functionality"], c["direction"], "en",
                 "hatecheck") for c in table]
    tier = "gold" if "c_testcase" in columns else "silver"
    text, direction = ("c_testcase", "t_direction") if tier == "gold" else ("c_perturb", None)
    lang = Path(path).stem  # SEAHateCheck names each file by its language: id.csv
    return [(f"{tier}:{n}", c[text], c["t_function"], c[direction] if direction else "", lang,
             "seahatecheck") for n, c in enumerate(table, 1)]


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv")
    parser.add_argument("--sample", type=int, help="at most this many cases a functionality")
    args = parser.parse_args()
    chosen = cases(args.csv)
    if args.sample:
        by_functionality = collections.defaultdict(list)
        for case in chosen:
            by_functionality[case[2]].append(case)
        rng = random.Random(64)
        keep = set()
        for group in by_functionality.values():
            keep.update(c[0] for c in rng.sample(group, min(args.sample, len(group))))
        chosen = [c for c in chosen if c[0] in keep]
    seen = set()
    for key, text, functionality, direction, lang, source in chosen:
        text = text.strip()
        if not text or text in seen:
            continue
        seen.add(text)
        toxic, harassment = labels(functionality, direction)
        if toxic is None and harassment is None:
            continue
        row = {
            "id": f"{source}:{key}",
            "text": text,
            "lang": lang,
            "labels": {"spam": None, "toxic": toxic, "harassment": harassment,
                       "financial_advice": None},
            "source": source,
            "kind": functionality,
        }
        print(json.dumps(row, ensure_ascii=False))


if __name__ == "__main__":
    main()
