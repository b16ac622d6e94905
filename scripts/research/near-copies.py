#!/usr/bin/env python3
"""Rows of new JSONL files that are near copies of rows elsewhere.

A writer's rows are merged into training data, or a held-back set is committed, only after each
text has been compared with every row it must stay apart from: a near copy on both sides of that
line would let a head be judged on what it trained on. Near means the word-token Jaccard
similarity (lowercased, letters and digits only) is at least --threshold, 0.6 by default, the
rule every merge since session 51 used.

    near-copies.py --new NEW.jsonl [--new ...] --against FILE_OR_DIR [...] [--within]

Prints one line per near copy (the new row's id, the score, the other row's file and id, both
texts) and exits 1 when any is found, 0 otherwise. --within also compares the new files' rows
with each other (rows of one file with the same id are the same row).
"""
import argparse
import json
import re
import sys
from pathlib import Path

WORD = re.compile(r"[^\W_]+", re.UNICODE)


def words(text):
    return frozenset(WORD.findall(text.lower()))


def rows_of(path):
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            line = line.strip()
            if not line:
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                sys.exit(f"near-copies: {path}:{number}: not JSON: {error}")
            text = row.get("text")
            if isinstance(text, str):
                yield str(row.get("id", f"line {number}")), text


def jsonl_files(paths):
    for path in map(Path, paths):
        if path.is_dir():
            yield from sorted(path.rglob("*.jsonl"))
        else:
            yield path


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--new", action="append", required=True, help="rows being added")
    parser.add_argument("--against", action="append", default=[], help="files or folders")
    parser.add_argument("--within", action="store_true", help="compare the new rows too")
    parser.add_argument("--threshold", type=float, default=0.6)
    args = parser.parse_args()

    new = [(str(path), key, text, words(text)) for path in jsonl_files(args.new)
           for key, text in rows_of(path)]
    new_paths = {str(path.resolve()) for path in jsonl_files(args.new)}
    others = [(str(path), key, text, words(text)) for path in jsonl_files(args.against)
              if str(path.resolve()) not in new_paths for key, text in rows_of(path)]
    if args.within:
        others += new
    # An inverted index on words: only rows sharing a word can reach any threshold above 0.
    index = {}
    for position, (_, _, _, bag) in enumerate(others):
        for word in bag:
            index.setdefault(word, []).append(position)

    found = 0
    reported = set()
    for path, key, text, bag in new:
        shared = {}
        for word in bag:
            for position in index.get(word, ()):
                shared[position] = shared.get(position, 0) + 1
        for position, common in shared.items():
            other_path, other_key, other_text, other_bag = others[position]
            if other_path == path and other_key == key:
                continue
            score = common / len(bag | other_bag)
            pair = frozenset([(path, key), (other_path, other_key)])
            if score >= args.threshold and pair not in reported:
                reported.add(pair)
                found += 1
                print(f"{key}\t{score:.2f}\t{other_path}\t{other_key}\n  {text}\n  {other_text}")
    print(f"near-copies: {len(new)} new rows, {len(others)} compared, {found} near copies",
          file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
