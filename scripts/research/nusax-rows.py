#!/usr/bin/env python3
"""Writes NusaX's Indonesian sentiment rows (Winata et al. 2023, CC BY-SA 4.0,
github.com/IndoNLP/nusax, `datasets/sentiment/indonesian/{train,valid,test}.csv`: 1,000 comments,
reviews and tweets written by people, not by this project) in the evaluation schema (issue 64,
item 2: informal Indonesian by other writers, for civil criticism and complaints that are not
abuse).

NusaX labels sentiment, not abuse, so the toxic and harassment labels here are this project's.
Every row is read as all four false except the negative comments about people, which were read
one by one (the ids below; found by searching the negative rows for insult words and for words
that name people, officials or "you", then reading every hit): abuse aimed at a person
(toxic and harassment true), abuse of a group or an unnamed crowd (toxic true, harassment unknown)
and the ones a reader could take either way (both unknown). Negative comments about places,
food, services and policies were kept as civil criticism (all four false).

    scripts/research/nusax-rows.py DIR > docs/experiments/other-writers/nusax-id.jsonl
"""
import csv
import json
import sys
from pathlib import Path

AIMED_AT_A_PERSON = {"0", "115", "155", "390", "423", "672", "677", "685", "782"}
AT_A_GROUP = {"45", "49", "137", "294", "481", "503", "599", "604", "644", "971"}
EITHER_WAY = {"20", "138", "259", "376", "399", "415", "641", "663", "735", "915", "929", "10"}


def labels(row_id):
    if row_id in AIMED_AT_A_PERSON:
        return True, True
    if row_id in AT_A_GROUP:
        return True, None
    if row_id in EITHER_WAY:
        return None, None
    return False, False


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    seen = set()
    for split in ("train", "valid", "test"):
        path = Path(sys.argv[1]) / f"{split}.csv"
        with open(path, encoding="utf-8", newline="") as f:
            for row in csv.DictReader(f):
                text = row["text"].strip()
                if not text or text in seen:
                    continue
                seen.add(text)
                toxic, harassment = labels(row["id"])
                print(json.dumps({
                    "id": f"nusax_senti_id:{row['id']}",
                    "text": text,
                    "lang": "id",
                    "labels": {"spam": False, "toxic": toxic, "harassment": harassment,
                               "financial_advice": False},
                    "source": "nusax_senti_id",
                    "kind": f"sentiment-{row['label']}",
                }, ensure_ascii=False))


if __name__ == "__main__":
    main()
