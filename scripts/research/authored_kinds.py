"""Shared by the authoring scripts (author-kinds.py, author-contempt*.py, author-address.py,
author-exclamations.py): labels, rows, writing them, and the split of each (kind, lang) block into
training rows and every fourth row held back."""
import json

F = {"spam": False, "toxic": False, "harassment": False, "financial_advice": False}


def lab(**kw):
    d = dict(F)
    d.update(kw)
    return d


def write_split(blocks, sizes, id_suffix, train_path, hold_path):
    """`blocks`: {(kind, lang): (labels or None, text)}, one row a line; with None, each line
    starts with P (contempt aimed at the reader or a named person: toxic and harassment) or G (at
    a group: toxic, harassment unknown). Every fourth row of each block goes to `hold_path`."""
    train, hold = [], []
    for (kind, lang), (labels, block) in blocks.items():
        lines = [l for l in block.split("\n") if l.strip()]
        assert len(lines) == sizes[kind], (kind, lang, len(lines))
        for i, line in enumerate(lines, 1):
            if labels is None:
                tag, text = line.split(" ", 1)
                assert tag in ("P", "G"), line
                row_labels = lab(toxic=True, harassment=True if tag == "P" else None)
            else:
                text, row_labels = line, labels
            row = {"id": f"aegis_authored:{kind}{id_suffix}:{lang}:{i}", "text": text,
                   "lang": lang, "labels": row_labels, "source": "aegis_authored", "kind": kind}
            (hold if i % 4 == 0 else train).append(row)
    texts = [r["text"] for r in train + hold]
    assert len(set(texts)) == len(texts)
    for path, rows in [(train_path, train), (hold_path, hold)]:
        with open(path, "w") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(len(train), len(hold))


def authored_row(id_kind, kind, lang, number, text, labels):
    """One authored row; its id is `aegis_authored:{id_kind}:{lang}:{number}`."""
    return {"id": f"aegis_authored:{id_kind}:{lang}:{number}", "text": text, "lang": lang,
            "labels": labels, "source": "aegis_authored", "kind": kind}


def authored_rows(kind, lang, texts, labels):
    """Rows of one kind and language, numbered from 0 in their order, all with `labels`."""
    return [authored_row(kind, kind, lang, i, t, labels) for i, t in enumerate(texts)]


def write_rows(path, rows):
    """`rows` as JSONL at `path`, replacing what was there."""
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def append_round(heads, texts, round_tag, holdout_name, train_path=None):
    """One authoring round of contempt: `texts` {(kind, lang): [(labels, text)]}; every fourth
    row of each block (the 4th, 8th, ...) goes to `docs/held-back/holdout_name`, never trained on, the rest
    to `authored-contempt.jsonl`, replacing that round's earlier rows there (ids carry
    `-{round_tag}:`), so running a round again adds nothing twice; or, for a round not shipped,
    to a file of its own at `train_path`."""
    train, held = [], []
    for (kind, lang), items in texts.items():
        for i, (labels, text) in enumerate(items):
            row = authored_row(f"{kind}-{round_tag}", kind, lang, i, text, labels)
            (held if i % 4 == 3 else train).append(row)
    path = heads / "authored-contempt.jsonl"
    kept = [json.loads(line) for line in open(path, encoding="utf-8")
            if line.strip() and f"-{round_tag}:" not in json.loads(line)["id"]]
    every = [r["text"] for r in kept + train + held]
    assert len(set(every)) == len(every), "a text written twice"
    if train_path is not None:
        write_rows(train_path, train)
        kept = []
    else:
        write_rows(path, kept + train)
    write_rows(heads.parents[1] / "docs/held-back" / holdout_name, held)
    print(f"{len(train)} training rows after the earlier {len(kept)}, {len(held)} held back")
