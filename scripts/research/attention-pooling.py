#!/usr/bin/env python3
"""Issue 64 item 3: does a learned pooling read who is addressed better than the mean?

The shipped heads read EmbeddingGemma's sentence embedding: the mean of every token's final state,
projected and normalised. A one-query attention pooling (softmax of q·h over the tokens) with q = 0
is exactly that mean, so it starts at the shipped reading and learns only where weighting tokens
helps. This script trains, for toxic and harassment, a logistic head on the mean ("mean") and the
same head jointly with q ("attention") on the shipped heads' training rows, with the same folds
(whole sources held out), the same class balance and the same threshold rule (at most 1% of the
benign rows' out-of-fold scores), then reads both on the held-back sets.

    cargo build -p aegis-cli --features lab
    target/debug/aegis token-states --out STATES/main --data FILE.jsonl ...   # one per file
    python -m venv VENV && VENV/bin/pip install torch safetensors
    VENV/bin/python scripts/research/attention-pooling.py --states STATES

STATES holds main/ (the training files, benign-real-holdout, dev-unseen: the dev rows not in
dev-permissive), ind1/ and ind2/ (docs/held-back/independent{,-2}/). Research only: the product
reads the mean.
"""
import argparse
import collections
import json
import math
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parents[2]
HEADS = ROOT / "prompt_guard/heads"
TRAINING = ["dev-permissive", "train-1", "train-2", "authored", "authored-benign", "benign-real"]
VALIDATORS = ["toxic", "harassment"]
KINDS = ["report-quoted", "untargeted-profanity", "civil-criticism", "polite-contempt"]


class States:
    """Every row of a set of files, with its token states packed end to end."""

    def __init__(self, parts):
        self.rows, tensors, lengths = [], [], []
        for rows, states, lens in parts:
            self.rows += rows
            tensors.append(states)
            lengths.append(lens)
        self.states = torch.cat(tensors).float()
        self.lengths = torch.cat(lengths)
        self.offsets = torch.cumsum(self.lengths, 0) - self.lengths

    def tokens(self, index):
        """The packed token states of rows `index` and each token's position in `index`."""
        lengths = self.lengths[index]
        starts = self.offsets[index]
        segment = torch.repeat_interleave(torch.arange(len(index)), lengths)
        within = torch.arange(int(lengths.sum())) - torch.repeat_interleave(
            torch.cumsum(lengths, 0) - lengths, lengths)
        return self.states[starts[segment] + within], segment


def read(states_dir, jsonl):
    data = load_file(str(states_dir / f"{jsonl.stem}.safetensors"))
    rows = [json.loads(line) for line in open(jsonl, encoding="utf-8") if line.strip()]
    lengths = data["lengths"].to(torch.int64)
    assert len(rows) == len(lengths), jsonl
    return (rows, data["states"], lengths), data


def pooled(h, segment, n, q):
    """Attention pooling with query q (q = 0: the mean) of packed states h into n rows."""
    if q is None:
        weights = torch.ones(len(h))
    else:
        # Scored on each state's direction: the final states' norms run from about 65 to 250
        # (the first and last tokens longest), so q·h with |q| = 0.3 already put all the weight
        # on one token.
        scores = (h / h.norm(dim=1, keepdim=True).clamp_min(1e-6)) @ q
        top = torch.full((n,), -1e30).scatter_reduce(0, segment, scores, "amax")
        weights = torch.exp(scores - top[segment])
    total = torch.zeros(n).index_add(0, segment, weights)
    return torch.zeros(n, h.shape[1]).index_add(0, segment, h * (weights / total[segment])[:, None])


class Reader:
    """Pooled states → projected, normalised embedding → standardised features."""

    def __init__(self, projection, normalize):
        self.projection = projection  # [768, 768]: the dense layers folded (both are linear)
        self.normalize = normalize
        self.mean = None
        self.std = None

    def embed(self, p):
        e = p @ self.projection.T
        if self.normalize:
            e = e / e.norm(dim=1, keepdim=True).clamp_min(1e-12)
        return e

    def features(self, p):
        return (self.embed(p) - self.mean) / self.std


def embed_all(reader, states, index, q, batch=512):
    out = []
    with torch.no_grad():
        for at in range(0, len(index), batch):
            part = index[at:at + batch]
            h, segment = states.tokens(part)
            out.append(reader.embed(pooled(h, segment, len(part), q)))
    return torch.cat(out)


def balanced_weights(y):
    positives = y.sum()
    negatives = len(y) - positives
    return torch.where(y > 0, len(y) / (2 * positives), len(y) / (2 * negatives))


def fit_mean_head(x, y, l2):
    """Class-balanced L2 logistic regression on fixed features (L-BFGS, convex)."""
    w = torch.zeros(x.shape[1], requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    sample = balanced_weights(y)
    opt = torch.optim.LBFGS([w, b], max_iter=200, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = (torch.nn.functional.binary_cross_entropy_with_logits(
            x @ w + b, y, weight=sample)) + l2 * (w * w).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return w.detach(), b.detach()


def fit_attention(reader, states, index, y, w0, b0, l2, q_l2, epochs, lr, seed):
    """The mean's head and a query, trained together from (w0, b0, q = 0)."""
    generator = torch.Generator().manual_seed(seed)
    w = w0.clone().requires_grad_(True)
    b = b0.clone().requires_grad_(True)
    q = torch.zeros(states.states.shape[1], requires_grad=True)
    sample = balanced_weights(y)
    opt = torch.optim.Adam([{"params": [w, b], "lr": lr * 0.1}, {"params": [q], "lr": lr}])
    for _ in range(epochs):
        order = torch.randperm(len(index), generator=generator)
        for at in range(0, len(order), 128):
            part = order[at:at + 128]
            h, segment = states.tokens(index[part])
            x = reader.features(pooled(h, segment, len(part), q))
            loss = (torch.nn.functional.binary_cross_entropy_with_logits(
                x @ w + b, y[part], weight=sample[part])
                + l2 * (w * w).sum() + q_l2 * (q * q).sum())
            opt.zero_grad()
            loss.backward()
            opt.step()
    return w.detach(), b.detach(), q.detach()


def roc_auc(scores, labels):
    pairs = sorted(zip(scores, labels))
    ranks, i = [0.0] * len(pairs), 0
    while i < len(pairs):
        j = i
        while j + 1 < len(pairs) and pairs[j + 1][0] == pairs[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        i = j + 1
    positives = sum(label for _, label in pairs)
    negatives = len(pairs) - positives
    if not positives or not negatives:
        return float("nan")
    rank_sum = sum(r for r, (_, label) in zip(ranks, pairs) if label)
    return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives)


def group_of(row):
    """As `LabelledMessage::source_group`: the source, except that rows the project wrote form
    one group per language and kind (their true labels, or benign)."""
    if not row["source"].startswith("aegis_"):
        return row["source"]
    positives = "+".join(sorted(k for k, v in row["labels"].items() if v is True))
    kind = row.get("kind") or positives or "benign"
    return f"{row['source']}:{row['lang']}:{kind}"


def folds_by_group(rows, y, k):
    """As `aegis_heads::source_folds`: groups with the most positives first, each onto the fold
    holding the fewest positives (or, for groups without positives, the fewest rows)."""
    sizes = collections.defaultdict(lambda: [0, 0])
    for row, label in zip(rows, y.tolist()):
        sizes[group_of(row)][0] += 1
        sizes[group_of(row)][1] += int(label)
    order = sorted(sizes.items(), key=lambda item: (-item[1][1], -item[1][0], item[0]))
    fold_rows, fold_positives, fold_of = [0] * k, [0] * k, {}
    for group, (count, positives) in order:
        load = [(fold_positives[f], fold_rows[f]) if positives else (fold_rows[f], fold_positives[f])
                for f in range(k)]
        fold = min(range(k), key=lambda f: (load[f], f))
        fold_rows[fold] += count
        fold_positives[fold] += positives
        fold_of[group] = fold
    return torch.tensor([fold_of[group_of(r)] for r in rows])


def threshold_at_budget(scores, benign, budget):
    flagged_scores = sorted(scores[benign].tolist(), reverse=True)
    allowed = int(math.floor(budget * len(flagged_scores)))
    return flagged_scores[allowed] if allowed < len(flagged_scores) else -1e30


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--states", type=Path, required=True)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--l2", type=float, default=1e-3)
    parser.add_argument("--q-l2", type=float, default=1e-3)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--benign-budget", type=float, default=0.01)
    parser.add_argument("--validators", default=",".join(VALIDATORS))
    parser.add_argument("--extra", action="append", default=[],
                        help="another file of prompt_guard/heads/ to train on, e.g. authored-kinds")
    args = parser.parse_args()
    torch.manual_seed(0)
    started = time.time()

    parts, meta = [], None
    for name in TRAINING + args.extra:
        part, meta = read(args.states / "main", HEADS / f"{name}.jsonl")
        parts.append(part)
    training = States(parts)
    projection = meta["projection.1"] @ meta["projection.0"]
    reader = Reader(projection, bool(meta["normalize"][0]))
    print(f"{len(training.rows)} training rows, {len(training.states)} tokens "
          f"({time.time() - started:.0f} s)", file=sys.stderr)

    def held(folder, path):
        part, _ = read(args.states / folder, path)
        return States([part])

    held_sets = {f"ind2/{k}": held("ind2", ROOT / f"docs/held-back/independent-2/{k}.jsonl")
                 for k in KINDS}
    held_sets.update({f"ind1/{k}": held("ind1", ROOT / f"docs/held-back/independent/{k}.jsonl")
                      for k in KINDS})
    held_sets["benign-real-holdout"] = held("main", HEADS / "benign-real-holdout.jsonl")
    if "authored-contempt" not in args.extra:
        held_sets["authored-contempt"] = held("main", HEADS / "authored-contempt.jsonl")
    dev_unseen = args.states / "main" / "dev-unseen.jsonl"
    if dev_unseen.exists():
        held_sets["dev-unseen"] = held("main", dev_unseen)

    flagged = collections.defaultdict(dict)  # (reading, validator) -> set name -> bool tensor
    scores_of = collections.defaultdict(dict)
    for validator in args.validators.split(","):
        index = torch.tensor([i for i, r in enumerate(training.rows)
                              if r["labels"].get(validator) is not None])
        rows = [training.rows[i] for i in index]
        y = torch.tensor([float(r["labels"][validator]) for r in rows])
        benign = torch.tensor([all(v is False for v in r["labels"].values()) for r in rows])
        folds = folds_by_group(rows, y, args.folds)
        mean_embedding = embed_all(reader, training, index, None)
        out_of_fold = {"mean": torch.zeros(len(rows)), "attention": torch.zeros(len(rows))}

        def fit(part):
            reader.mean = mean_embedding[part].mean(0)
            reader.std = mean_embedding[part].std(0).clamp_min(1e-6)
            x = (mean_embedding[part] - reader.mean) / reader.std
            w, b = fit_mean_head(x, y[part], args.l2)
            wa, ba, q = fit_attention(reader, training, index[part], y[part], w, b,
                                      args.l2, args.q_l2, args.epochs, args.lr, seed=1)
            return (reader.mean, reader.std), (w, b, None), (wa, ba, q)

        def score(standard, head, states, which):
            reader.mean, reader.std = standard
            w, b, q = head
            return ((embed_all(reader, states, which, q) - reader.mean) / reader.std) @ w + b

        for fold in range(args.folds):
            train_part = torch.nonzero(folds != fold).flatten()
            test_part = torch.nonzero(folds == fold).flatten()
            standard, mean_head, attention_head = fit(train_part)
            out_of_fold["mean"][test_part] = score(standard, mean_head, training, index[test_part])
            out_of_fold["attention"][test_part] = score(standard, attention_head, training,
                                                        index[test_part])
            print(f"{validator}: fold {fold + 1}/{args.folds} ({time.time() - started:.0f} s)",
                  file=sys.stderr)
        standard, mean_head, attention_head = fit(torch.arange(len(rows)))
        q = attention_head[2]
        print(f"\n## {validator}: {len(rows)} rows, {int(y.sum())} positives, "
              f"|q| = {q.norm():.2f}")
        langs = [r["lang"] for r in rows]
        for reading, head in (("mean", mean_head), ("attention", attention_head)):
            oof = out_of_fold[reading]
            line = threshold_at_budget(oof, benign, args.benign_budget)
            recall = ((oof >= line) & (y > 0)).sum() / (y > 0).sum()
            by_lang = " / ".join(
                f"{roc_auc([oof[i].item() for i in range(len(rows)) if langs[i] == lang], [y[i].item() for i in range(len(rows)) if langs[i] == lang]):.3f}"
                for lang in ("en", "id"))
            print(f"{reading}: held-out-source ROC AUC {roc_auc(oof.tolist(), y.tolist()):.3f} "
                  f"(en / id {by_lang}), recall at the 1% line {recall:.3f}")
            for name, states in held_sets.items():
                everything = torch.arange(len(states.rows))
                s = score(standard, head, states, everything)
                scores_of[(reading, validator)][name] = s
                flagged[(reading, validator)][name] = s >= line

    print("\n## Held back: share flagged by toxic or harassment, en / id")
    print("| set | mean | attention |\n|---|---|---|")
    for name, states in held_sets.items():
        cells = []
        for reading in ("mean", "attention"):
            hit = None
            for validator in args.validators.split(","):
                f = flagged[(reading, validator)][name]
                hit = f if hit is None else hit | f
            shares = []
            for lang in ("en", "id"):
                mask = torch.tensor([r["lang"] == lang for r in states.rows])
                if mask.sum():
                    shares.append(f"{100 * hit[mask].float().mean():.0f}%")
            cells.append(" / ".join(shares))
        print(f"| {name} | {cells[0]} | {cells[1]} |")

    print("\n## Threshold-free: ROC AUC, contempt against the other three kinds "
          "(higher of the validators' logits), en / id")
    for folder in ("ind2", "ind1"):
        cells = []
        for reading in ("mean", "attention"):
            scores, labels, langs = [], [], []
            for kind in KINDS:
                name = f"{folder}/{kind}"
                s = torch.stack([scores_of[(reading, v)][name]
                                 for v in args.validators.split(",")]).max(0).values
                scores += s.tolist()
                labels += [kind == "polite-contempt"] * len(s)
                langs += [r["lang"] for r in held_sets[name].rows]
            cells.append(" / ".join(
                f"{roc_auc([s for s, l in zip(scores, langs) if l == lang], [y for y, l in zip(labels, langs) if l == lang]):.3f}"
                for lang in ("en", "id")))
        print(f"{folder}: mean {cells[0]}, attention {cells[1]}")
    if "dev-unseen" in held_sets:
        rows = held_sets["dev-unseen"].rows
        for validator in args.validators.split(","):
            labelled = [i for i, r in enumerate(rows) if r["labels"].get(validator) is not None]
            y = [bool(rows[i]["labels"][validator]) for i in labelled]
            cells = [f"{roc_auc([scores_of[(reading, validator)]['dev-unseen'][i].item() for i in labelled], y):.3f}"
                     for reading in ("mean", "attention")]
            print(f"dev-unseen {validator} ROC AUC: mean {cells[0]}, attention {cells[1]}")
    print(f"\n{time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
