#!/usr/bin/env python3
"""Issue 40: what a second toxic head, trained on contempt without profanity against every benign
row, adds when either head fails the message. Reads `aegis check --file F --json --no-history`
output of the shipped heads (SHIPPED/) and of the contempt head alone (CONTEMPT/) on the same
files, and prints, per threshold of the contempt head, what the union flags.

    contempt-reading.py SHIPPED CONTEMPT TWEETS.jsonl THRESHOLD...
Each folder holds benign-real-holdout.json, benign-holdout.json, tweets.json, contempt-holdout.json
and kinds-holdout.json (the held-back files of prompt_guard/heads/, and TWEETS for tweets.json).
"""
import json
import sys

HEADS = "prompt_guard/heads/"


def verdicts(folder, name):
    return [json.loads(line) for line in open(f"{folder}/{name}.json", encoding="utf-8")]


def failed(verdict, validator):
    return any(s["step"] == validator and s["status"] == "failed" for s in verdict["execution_per_step"])


def main(shipped, contempt, tweets_path, thresholds):
    tweets = [json.loads(line) for line in open(tweets_path, encoding="utf-8")]
    for t in thresholds:
        said = lambda c: c["scores"]["toxic"] >= t
        print(f"== contempt head at {t}")
        for name in ["benign-real-holdout", "benign-holdout"]:
            s, c = verdicts(shipped, name), verdicts(contempt, name)
            before = sum(v["status_guard"] == "failed" for v in s)
            after = sum(v["status_guard"] == "failed" or said(w) for v, w in zip(s, c))
            print(f"{name:22} {len(s)} rows, any validator {before} -> {after}")
        s, c = verdicts(shipped, "tweets"), verdicts(contempt, "tweets")
        for label, what in [(True, "toxic caught"), (False, "benign flagged by toxic")]:
            rows = [i for i, r in enumerate(tweets) if r["labels"].get("toxic") is label]
            before = sum(failed(s[i], "toxic") for i in rows)
            after = sum(failed(s[i], "toxic") or said(c[i]) for i in rows)
            print(f"tweets {what:24} {before} -> {after} of {len(rows)}")
        for name in ["contempt-holdout", "kinds-holdout"]:
            rows = [json.loads(line) for line in open(HEADS + name + ".jsonl", encoding="utf-8")]
            s, c = verdicts(shipped, name), verdicts(contempt, name)
            kinds = sorted({(r["kind"], r["lang"]) for r in rows})
            for kind, lang in kinds:
                idx = [i for i, r in enumerate(rows) if (r["kind"], r["lang"]) == (kind, lang)]
                tb = sum(failed(s[i], "toxic") for i in idx)
                ta = sum(failed(s[i], "toxic") or said(c[i]) for i in idx)
                ab = sum(s[i]["status_guard"] == "failed" for i in idx)
                aa = sum(s[i]["status_guard"] == "failed" or said(c[i]) for i in idx)
                print(f"  {name:17} {kind:16} {lang}  toxic {tb} -> {ta}, any {ab} -> {aa} of {len(idx)}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], [float(t) for t in sys.argv[4:]])
