#!/usr/bin/env python3
"""Writes OUT: toxic's training rows with an ordinary sentence beside them (issue 64, session 64).
scripts/train-heads.sh makes it before each run; it is not committed, being made of the training
files' own rows (2.4 MB of text they already hold).

The heads read the mean of the encoder's token states, so one friendly sentence after an insult
pulls the mean towards friendly: on the shipped heads of session 63 a dinner question appended to
contempt took toxic's catch from 85% to 7% in Indonesian (research note, "The highest of the
maps, and insults with text beside them"). Each toxic row of the training files gets one copy with
a benign sentence of its language before (three in ten) or after it, labelled as the row was;
as many toxic-false rows get the same, so a sentence added to a report or a swear at the traffic
stays as harmless as the row. The sentences come from the training files' own benign rows
(benign-real.jsonl, authored-benign.jsonl, 4 words or more): nothing held back, and no row of a
source the hidden held-out set is drawn from that is not already a training row.

Each copy keeps its row's id (plus ":diluted"), source, language, kind and licence, so the
held-out-source folds hold it out with its row, and names the sentence's row in "diluted_with".

    scripts/make-diluted-rows.py OUT        # deterministic (seed 64): the same files, the same rows
"""
import json
import random
import sys
from pathlib import Path

HEADS = Path(__file__).resolve().parents[1] / "prompt_guard" / "heads"
BASES = ["dev-permissive", "train-1", "train-2", "authored", "authored-writers"]
SENTENCES = ["benign-real", "authored-benign"]


def rows(name):
    with open(HEADS / f"{name}.jsonl", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make-diluted-rows.py OUT")
    out = Path(sys.argv[1])
    rng = random.Random(64)
    sentences = {"en": [], "id": []}
    for name in SENTENCES:
        for row in rows(name):
            if (
                row["lang"] in sentences
                and len(row["text"].split()) >= 4
                and not any(row["labels"].values())
            ):
                sentences[row["lang"]].append(row)
    toxic, not_toxic = [], []
    for name in BASES:
        for row in rows(name):
            label = row["labels"].get("toxic")
            if label is True:
                toxic.append(row)
            elif label is False:
                not_toxic.append(row)
    rng.shuffle(not_toxic)
    diluted = []
    for row in toxic + not_toxic[: len(toxic)]:
        sentence = rng.choice(sentences[row["lang"]])
        before = rng.random() < 0.3
        text = f"{sentence['text']} {row['text']}" if before else f"{row['text']} {sentence['text']}"
        # The row's labels for every validator: an ordinary sentence beside it changes none,
        # and a benign row with one beside it is one more benign row for each budget (labelled
        # toxic alone, the copies pushed the benign rows whose sentences they borrow over the
        # line: 1% of them at 0.747 against 0.656).
        diluted.append(
            {**row, "id": f"{row['id']}:diluted", "text": text, "diluted_with": sentence["id"]}
        )
    rng.shuffle(diluted)
    with open(out, "w", encoding="utf-8") as handle:
        for row in diluted:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{out}: {len(diluted)} rows ({len(toxic)} toxic)", file=sys.stderr)


if __name__ == "__main__":
    main()
