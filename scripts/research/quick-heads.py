#!/usr/bin/env python3
"""Toxic's and harassment's heads in seconds, from cached token states: the mean against a learned
pooling (issue 64 item 3), and candidate training data, before `aegis train` spends ten minutes a
validator on them.

The shipped heads read EmbeddingGemma's sentence embedding: the mean of every token's final state,
projected and normalised. A one-query attention pooling (softmax of q·h over the tokens) with q = 0
is exactly that mean, so it starts at the shipped reading and learns only where weighting tokens
helps. For toxic and harassment this trains a logistic head on the mean ("mean") and the same head
jointly with q ("attention") on the shipped heads' training rows, with the same folds as `aegis
train` (whole sources held out, `aegis_heads::source_folds`), the same class balance, the same
choice of L2 strength and the same line (at most 1% of the benign rows' out-of-fold scores), then
reads both on the held-back sets. Its mean head reproduces `aegis train`'s held-out-source ROC AUC
to 0.002 (toxic 0.959 against 0.957, harassment 0.982 against 0.981; before the eight writers'
rows 0.966 against 0.965 and 0.971 against 0.971); the guard's readings (quotes elided, exclamations, contempt at
layer 16) are not applied, so held-back figures are the head's alone.

    cargo build -p aegis-cli --features lab
    S=~/.cache/aegis/tokstates
    target/debug/aegis token-states --out $S/main --data prompt_guard/heads/FILE.jsonl ...
    #   the seven training files, benign-real-holdout, authored-contempt, authored-kinds, and
    #   dev-unseen.jsonl (dev.jsonl's rows not in dev-permissive, copied into $S/main)
    target/debug/aegis token-states --out $S/ind1 --data docs/held-back/independent/*.jsonl ...
    target/debug/aegis token-states --out $S/ind2 --data docs/held-back/independent-2/*.jsonl ...
    #   and ind3, ind4 from independent-3/ and independent-4/ the same way
    target/debug/aegis token-states --out $S/own --data docs/held-back/*.jsonl ...
    target/debug/aegis token-states --out $S/other --data docs/experiments/other-writers/*.jsonl
    python -m venv VENV && VENV/bin/pip install torch safetensors
    VENV/bin/python scripts/research/quick-heads.py --states $S [--mean-only] \
        [--extra FILE --outside-budget FILE --drop-hateful] [--reading FILE] [--judge]

--judge adds the unread independent sets (3 and 4): read them once per candidate chosen on
everything else. Later sets and other held-back files go in with --held FILE (states from
`aegis token-states` in any folder of --states, the file's rows reported per kind): an
independent set's four files concatenated, or `suffix-dilution.py --write`'s suffixed insults.
Toxic's diluted rows (`scripts/make-diluted-rows.py OUT`) train with --extra OUT, as the shipped
toxic head does; --scores-out PREFIX writes each reading's out-of-fold scores for
compare-scores.py (session 66: attention pooling with the diluted rows, the research note).
--learned tokens trains a token-level score added to the mean's logit instead of attention, --learned mlp a residual MLP on the mean (--epochs are then full-batch steps).
`aegis train --attention VALIDATOR` trains the same pooling in the product (scored on projected
states, as --scores projected), kept only where held-out source folds say it reads better.
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
TRAINING = ["dev-permissive", "train-1", "train-2", "authored", "authored-benign", "benign-real",
            "authored-writers"]
VALIDATORS = ["toxic", "harassment"]
SCORES = "direction"  # or "raw", "projected": --scores
PROJECTION = None  # the dense layers folded, set in main
# The MLP's activation (--mlp-activation): the product's hidden layer is ReLU (no transcendental
# function, so the same bits on every CPU).
ACTIVATION = torch.nn.functional.relu
KINDS = ["report-quoted", "untargeted-profanity", "civil-criticism", "polite-contempt"]
# The independent sets' folders of states and of rows. The first two have been read by earlier
# candidates; the judges are read once per candidate chosen on everything else (--judge).
INDEPENDENT_FOLDERS = {"ind1": "independent", "ind2": "independent-2", "ind3": "independent-3",
                       "ind4": "independent-4"}
INDEPENDENT_READ = ("ind1", "ind2")
INDEPENDENT_JUDGES = ("ind3", "ind4")


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


def subset(rows, states, lengths, kept):
    """Rows `kept` of one states file, with their token states, as a part for `States`."""
    offsets = torch.cumsum(lengths, 0) - lengths
    tokens = torch.cat([torch.arange(offsets[i], offsets[i] + lengths[i]) for i in kept])
    return [rows[i] for i in kept], states[tokens], lengths[kept]


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
        # Scored on each state's direction by default: the final states' norms run from about 65
        # to 250 (the first and last tokens longest), so q·h with |q| = 0.3 can already give
        # scores tens of units apart and put nearly all the weight on a few tokens.
        if SCORES == "projected":
            # What `llama-server --pooling none` serves: each state after the dense layers.
            projected = h @ PROJECTION.T
            h_scored = projected / projected.norm(dim=1, keepdim=True).clamp_min(1e-6)
        elif SCORES == "direction":
            h_scored = h / h.norm(dim=1, keepdim=True).clamp_min(1e-6)
        else:
            h_scored = h
        scores = h_scored @ q
        top = torch.full((n,), -1e30).scatter_reduce(0, segment, scores, "amax")
        weights = torch.exp(scores - top[segment])
    total = torch.zeros(n).index_add(0, segment, weights)
    return torch.zeros(n, h.shape[1]).index_add(0, segment, h * (weights / total[segment])[:, None])


class Reader:
    """Pooled states → projected, normalised embedding."""

    def __init__(self, projection, normalize):
        self.projection = projection  # [768, 768]: the dense layers folded (both are linear)
        self.normalize = normalize

    def embed(self, p):
        e = p @ self.projection.T
        if self.normalize:
            e = e / e.norm(dim=1, keepdim=True).clamp_min(1e-12)
        return e


def standardised(embedding, standard):
    """`embedding` in the units a head was fitted in: `standard` is its training rows' (mean, std)."""
    mean, std = standard
    return (embedding - mean) / std


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


def fit_mean_head(x, y, l2, weight=None):
    """Class-balanced L2 logistic regression on fixed features (L-BFGS, convex); `weight` scales
    each row's share of the loss (--extra-weight)."""
    w = torch.zeros(x.shape[1], requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    sample = balanced_weights(y) if weight is None else balanced_weights(y) * weight
    opt = torch.optim.LBFGS([w, b], max_iter=200, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = (torch.nn.functional.binary_cross_entropy_with_logits(
            x @ w + b, y, weight=sample)) + l2 * (w * w).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return w.detach(), b.detach()


def token_pool(states, index, u, batch=4096):
    """Each row's soft maximum of its tokens' scores u·h/|h| (log-sum-exp less the log of its
    length, so u = 0 gives 0 for every row): a token-level reading added to the mean's logit."""
    out = []
    for at in range(0, len(index), batch):
        part = index[at:at + batch]
        h, segment = states.tokens(part)
        z = (h / h.norm(dim=1, keepdim=True).clamp_min(1e-6)) @ u
        top = torch.full((len(part),), -1e30).scatter_reduce(0, segment, z.detach(), "amax")
        total = torch.zeros(len(part)).index_add(0, segment, torch.exp(z - top[segment]))
        out.append(top + torch.log(total) - torch.log(states.lengths[part].float()))
    return torch.cat(out)


def window_max(reader, standard, w, b, states, index, width, batch=512):
    """Each row's highest logit of the head (w, b) over windows of `width` consecutive token
    states (stride width/2; a row no longer than a window is one window), each window's states
    mean-pooled as the sentence embedding is. The states come from the whole message, so a
    window holding a quoted insult has read the frame around it; an ordinary sentence beside an
    insult no longer dilutes the insult's window."""
    stride = max(1, width // 2)
    out = []
    for at in range(0, len(index), batch):
        part = index[at:at + batch]
        h, _ = states.tokens(part)
        cumulative = torch.cat([torch.zeros(1, h.shape[1], dtype=torch.float64),
                                h.double().cumsum(0)])
        lengths = states.lengths[part].tolist()
        starts, ends, owner, offset = [], [], [], 0
        for row, length in enumerate(lengths):
            if length <= width:
                spans = [(0, length)]
            else:
                spans = [(k, k + width) for k in range(0, length - width + 1, stride)]
                if spans[-1][1] < length:
                    spans.append((length - width, length))
            for start, end in spans:
                starts.append(offset + start)
                ends.append(offset + end)
                owner.append(row)
            offset += length
        starts, ends = torch.tensor(starts), torch.tensor(ends)
        means = ((cumulative[ends] - cumulative[starts]) / (ends - starts)[:, None]).float()
        logits = standardised(reader.embed(means), standard) @ w + b
        out.append(torch.full((len(part),), -1e30).scatter_reduce(
            0, torch.tensor(owner), logits, "amax"))
    return torch.cat(out)


def train_with_extra(w0, b0, dim, y, epochs, lr, l2, extra_l2, seed, logits_of):
    """The mean's head (w, b) and one extra vector of `dim`, starting at zero, trained together
    with Adam on minibatches of 128 rows: `logits_of(w, b, extra, part)` gives the logits of the
    rows `part` (positions in y)."""
    generator = torch.Generator().manual_seed(seed)
    w = w0.clone().requires_grad_(True)
    b = b0.clone().requires_grad_(True)
    extra = torch.zeros(dim, requires_grad=True)
    sample = balanced_weights(y)
    opt = torch.optim.Adam([{"params": [w, b], "lr": lr * 0.1}, {"params": [extra], "lr": lr}])
    for _ in range(epochs):
        order = torch.randperm(len(y), generator=generator)
        for at in range(0, len(order), 128):
            part = order[at:at + 128]
            loss = (torch.nn.functional.binary_cross_entropy_with_logits(
                logits_of(w, b, extra, part), y[part], weight=sample[part])
                + l2 * (w * w).sum() + extra_l2 * (extra * extra).sum())
            opt.zero_grad()
            loss.backward()
            opt.step()
    return w.detach(), b.detach(), extra.detach()


def fit_tokens(standard, mean_embedding, states, index, y, w0, b0, l2, u_l2, epochs, lr, seed):
    """The mean's head and a token-level score, trained together from (w0, b0, u = 0)."""
    x_all = standardised(mean_embedding, standard)
    w, b, u = train_with_extra(
        w0, b0, states.states.shape[1], y, epochs, lr, l2, u_l2, seed,
        lambda w, b, u, part: x_all[part] @ w + b + token_pool(states, index[part], u))
    return w, b, ("tokens", u)


def fit_mlp(standard, mean_embedding, y, w0, b0, l2, hidden, decay, steps, lr, weight, seed):
    """The mean's head plus a small residual MLP on the same features (its output layer starting
    at zero, so it starts at the linear head): can a non-linear map draw the line the kinds need
    without giving up the sources' ROC AUC?"""
    generator = torch.Generator().manual_seed(seed)
    x = standardised(mean_embedding, standard)
    w = w0.clone().requires_grad_(True)
    b = b0.clone().requires_grad_(True)
    first = (torch.randn(x.shape[1], hidden, generator=generator) / math.sqrt(x.shape[1]))
    first.requires_grad_(True)
    first_bias = torch.zeros(hidden, requires_grad=True)
    out = torch.zeros(hidden, requires_grad=True)
    sample = balanced_weights(y) * weight
    opt = torch.optim.Adam([w, b, first, first_bias, out], lr=lr)
    for _ in range(steps):
        logits = x @ w + b + ACTIVATION(x @ first + first_bias) @ out
        loss = (torch.nn.functional.binary_cross_entropy_with_logits(logits, y, weight=sample)
                + l2 * (w * w).sum() + decay * ((first * first).sum() + (out * out).sum()))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return w.detach(), b.detach(), ("mlp", first.detach(), first_bias.detach(), out.detach())


def fit_attention(reader, standard, states, index, y, w0, b0, l2, q_l2, epochs, lr, seed):
    """The mean's head and a query, trained together from (w0, b0, q = 0)."""

    def logits_of(w, b, q, part):
        h, segment = states.tokens(index[part])
        return standardised(reader.embed(pooled(h, segment, len(part), q)), standard) @ w + b

    return train_with_extra(w0, b0, states.states.shape[1], y, epochs, lr, l2, q_l2, seed,
                            logits_of)


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


def choose_l2(embedding, y, folds, k, weight):
    """As `aegis train`: the strength among alpha 0.1 to 10,000 (a sum loss's, alpha/2 |w|², here
    a mean loss's alpha / 2n) with the highest held-out-source ROC AUC, the strongest on a tie."""
    best = None
    for alpha in (10_000.0, 1_000.0, 100.0, 10.0, 1.0, 0.1):
        l2 = alpha / (2 * len(y))
        out_of_fold = torch.zeros(len(y))
        for fold in range(k):
            part = torch.nonzero(folds != fold).flatten()
            held = torch.nonzero(folds == fold).flatten()
            mean = embedding[part].mean(0)
            std = embedding[part].std(0).clamp_min(1e-6)
            w, b = fit_mean_head((embedding[part] - mean) / std, y[part], l2, weight[part])
            out_of_fold[held] = ((embedding[held] - mean) / std) @ w + b
        auc = roc_auc(out_of_fold.tolist(), y.tolist())
        if best is None or auc > best[0]:
            best = (auc, l2)
    return best[1]


def train_second_map(args, validator, rows, y, benign, embedding, reading_states,
                     reading_embedding):
    """The head's negatives and the reading file's rows, a map of their own with its line at the
    reading budget; returns scoring (logit minus that line) for held-back sets."""
    negatives = [i for i in range(len(rows)) if y[i] == 0]
    mine = [j for j, r in enumerate(reading_states.rows) if r["labels"].get(validator) is not None]
    x_all = torch.cat([embedding[negatives], reading_embedding[mine]])
    y_all = torch.cat([torch.zeros(len(negatives)),
                       torch.tensor([float(reading_states.rows[j]["labels"][validator])
                                     for j in mine])])
    all_rows = [rows[i] for i in negatives] + [reading_states.rows[j] for j in mine]
    all_benign = torch.cat([benign[negatives], torch.tensor(
        [all(v is False for v in reading_states.rows[j]["labels"].values()) for j in mine])])
    folds = folds_by_group(all_rows, y_all, args.folds)
    out_of_fold = torch.zeros(len(all_rows))

    def fit(part):
        mean = x_all[part].mean(0)
        std = x_all[part].std(0).clamp_min(1e-6)
        w, b = fit_mean_head((x_all[part] - mean) / std, y_all[part], 1_000.0 / (2 * len(part)))
        return mean, std, w, b

    for fold in range(args.folds):
        mean, std, w, b = fit(torch.nonzero(folds != fold).flatten())
        held = torch.nonzero(folds == fold).flatten()
        out_of_fold[held] = ((x_all[held] - mean) / std) @ w + b
    line = threshold_at_budget(out_of_fold, all_benign, args.reading_budget)
    caught = ((out_of_fold >= line) & (y_all > 0)).sum() / (y_all > 0).sum()
    print(f"second map: {int(y_all.sum())} positives, caught out of fold at its line {caught:.2f}")
    mean, std, w, b = fit(torch.arange(len(all_rows)))

    def second(embedding):
        return ((embedding - mean) / std) @ w + b - line

    return second


def threshold_at_budget(scores, benign, budget):
    flagged_scores = sorted(scores[benign].tolist(), reverse=True)
    allowed = int(math.floor(budget * len(flagged_scores)))
    return flagged_scores[allowed] if allowed < len(flagged_scores) else -1e30


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--states", type=Path, required=True)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--l2", type=float, default=None,
                        help="L2 strength a row; default: chosen as `aegis train` does")
    parser.add_argument("--q-l2", type=float, default=1e-3)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--benign-budget", type=float, default=0.01)
    parser.add_argument("--validators", default=",".join(VALIDATORS))
    parser.add_argument("--scores", choices=["direction", "raw", "projected"],
                        default="direction",
                        help="score each token on q·h/|h| (direction), q·h (raw) or on the "
                        "direction of its state after the dense layers (projected)")
    parser.add_argument("--extra", action="append", default=[], type=Path,
                        help="another file to train on (its states in any folder of --states)")
    parser.add_argument("--outside-budget", action="append", default=[], type=Path,
                        help="an --extra file whose all-false rows are near misses, not traffic: "
                        "they train the heads but do not set the line")
    parser.add_argument("--negatives-only", action="append", default=[], type=Path,
                        help="an --extra file of which only the rows violating nothing are kept")
    parser.add_argument("--extra-weight", type=float, default=1.0,
                        help="each --extra row's weight in the heads' loss (the shipped rows' is 1)")
    parser.add_argument("--unscored", action="append", default=[],
                        help="a shipped training file (its stem, e.g. authored-writers) still "
                        "trained on but left out of the 'rows alone' ROC AUC, to compare with "
                        "heads trained before it")
    parser.add_argument("--by-source", action="store_true",
                        help="print each source's recall (or share flagged) at the line")
    parser.add_argument("--drop-kind", action="append", default=[],
                        help="leave out --extra rows of this kind")
    parser.add_argument("--drop-hateful", action="store_true",
                        help="leave out --extra rows whose kind ends in _h (HateCheck's hateful "
                        "cases), keeping its contrast cases")
    parser.add_argument("--line-per-language", action="store_true",
                        help="draw each language's line on its own benign rows")
    parser.add_argument("--reading", action="append", default=[], type=Path,
                        help="train a second map (as `aegis train --reading`) on this file's rows "
                        "beside the head's negatives, its own line at --reading-budget; a message "
                        "fails when either map fails it (mean only)")
    parser.add_argument("--reading-budget", type=float, default=0.002)
    parser.add_argument("--reading-for", default="toxic", help="the validators given a second map")
    parser.add_argument("--judge", action="store_true",
                        help="read the unread independent sets (3 and 4) too: once per candidate "
                        "chosen on everything else")
    parser.add_argument("--held", action="append", default=[], type=Path,
                        help="another held-back file (its states in any folder of --states), "
                        "read per kind: e.g. suffix-dilution.py --write's rows, or an "
                        "independent set's files")
    parser.add_argument("--mean-only", action="store_true", help="skip the learned reading")
    parser.add_argument("--mlp-hidden", type=int, default=64)
    parser.add_argument("--mlp-activation", choices=["relu", "gelu"], default="relu")
    parser.add_argument("--scores-out", help="append each reading's out-of-fold scores to "
                        "PREFIX-mean.jsonl and PREFIX-attention.jsonl, for compare-scores.py")
    parser.add_argument("--window", type=int, default=16,
                        help="--learned window: the window's width in tokens")
    parser.add_argument("--learned", choices=["attention", "tokens", "mlp", "window"],
                        default="attention",
                        help="the learned reading beside the mean: attention pooling, or a "
                        "token-level score (soft maximum over tokens) added to the mean's logit "
                        "(--q-l2 is its penalty), or the mean's head read on windows of --window "
                        "tokens too, the highest logit taken (nothing learned)")
    args = parser.parse_args()
    global SCORES, ACTIVATION, PROJECTION
    SCORES = args.scores
    ACTIVATION = getattr(torch.nn.functional, args.mlp_activation)
    torch.manual_seed(0)
    started = time.time()
    if args.scores_out:
        # Each validator appends its scores: start the run's files empty.
        for reading in ("mean", "attention"):
            open(f"{args.scores_out}-{reading}.jsonl", "w", encoding="utf-8").close()

    parts, meta = [], None
    for name in TRAINING:
        part, meta = read(args.states / "main", HEADS / f"{name}.jsonl")
        for r in part[0]:
            r["base"] = True
            # The older-rows figure leaves out the files named by --unscored (still trained on).
            r["scored"] = name not in args.unscored
        parts.append(part)
    outside = {str(p.resolve()) for p in args.outside_budget}
    for path in args.extra:
        folder = next(f for f in args.states.iterdir() if (f / f"{path.stem}.safetensors").exists())
        (rows, states, lengths), _ = read(folder, path)
        negatives_only = str(path.resolve()) in {str(p.resolve()) for p in args.negatives_only}
        keep = [not (args.drop_hateful and str(r.get("kind", "")).endswith("_h"))
                and r.get("kind") not in args.drop_kind
                and not (negatives_only and any(v is True for v in r["labels"].values()))
                for r in rows]
        for r in rows:
            r["outside_budget"] = str(path.resolve()) in outside
        kept = [i for i, k in enumerate(keep) if k]
        parts.append(subset(rows, states, lengths, kept))
        print(f"{path.name}: {len(kept)} of {len(rows)} rows", file=sys.stderr)
    training = States(parts)
    projection = meta["projection.1"] @ meta["projection.0"]
    PROJECTION = projection.float()
    reader = Reader(projection, bool(meta["normalize"][0]))
    print(f"{len(training.rows)} training rows, {len(training.states)} tokens "
          f"({time.time() - started:.0f} s)", file=sys.stderr)

    def held(folder, path):
        part, _ = read(args.states / folder, path)
        return States([part])

    held_sets = {}
    independent = list(INDEPENDENT_READ) + (list(INDEPENDENT_JUDGES) if args.judge else [])
    for folder in independent:
        if (args.states / folder).is_dir():
            held_sets.update({f"{folder}/{k}": held(
                folder, ROOT / f"docs/held-back/{INDEPENDENT_FOLDERS[folder]}/{k}.jsonl")
                for k in KINDS})
    held_sets["benign-real-holdout"] = held("main", HEADS / "benign-real-holdout.jsonl")
    if not any(p.stem == "authored-contempt" for p in args.extra):
        held_sets["authored-contempt"] = held("main", HEADS / "authored-contempt.jsonl")
    for path in sorted((ROOT / "docs/held-back").glob("*holdout*.jsonl")):
        if (args.states / "own" / f"{path.stem}.safetensors").exists():
            held_sets[f"own/{path.stem}"] = held("own", path)
    for path in args.held:
        folder = next(f for f in args.states.iterdir() if (f / f"{path.stem}.safetensors").exists())
        (rows, states, lengths), _ = read(folder, path)
        for kind in sorted({r.get("kind", "") for r in rows}):
            kept = [i for i, r in enumerate(rows) if r.get("kind", "") == kind]
            held_sets[f"{path.stem}/{kind}"] = States([subset(rows, states, lengths, kept)])
    dev_unseen = args.states / "main" / "dev-unseen.jsonl"
    if dev_unseen.exists():
        held_sets["dev-unseen"] = held("main", dev_unseen)

    reading_states = None
    if args.reading:
        reading_parts = []
        for path in args.reading:
            folder = next(f for f in args.states.iterdir()
                          if (f / f"{path.stem}.safetensors").exists())
            part, _ = read(folder, path)
            reading_parts.append(part)
        reading_states = States(reading_parts)
        reading_embedding = embed_all(reader, reading_states,
                                      torch.arange(len(reading_states.rows)), None)

    # Every row's mean reading, read once: each validator's heads and folds index into these.
    training_mean = embed_all(reader, training, torch.arange(len(training.rows)), None)
    held_mean = {name: embed_all(reader, states, torch.arange(len(states.rows)), None)
                 for name, states in held_sets.items()}

    flagged = collections.defaultdict(dict)  # (reading, validator) -> set name -> bool tensor
    scores_of = collections.defaultdict(dict)
    for validator in args.validators.split(","):
        index = torch.tensor([i for i, r in enumerate(training.rows)
                              if r["labels"].get(validator) is not None])
        rows = [training.rows[i] for i in index]
        y = torch.tensor([float(r["labels"][validator]) for r in rows])
        benign = torch.tensor([all(v is False for v in r["labels"].values())
                               and not r.get("outside_budget") for r in rows])
        folds = folds_by_group(rows, y, args.folds)
        mean_embedding = training_mean[index]
        weight = torch.tensor([1.0 if r.get("base") else args.extra_weight for r in rows])
        l2 = args.l2 if args.l2 is not None else choose_l2(mean_embedding, y, folds, args.folds,
                                                           weight)
        print(f"{validator}: L2 {l2:.2g} a row", file=sys.stderr)
        out_of_fold = {"mean": torch.zeros(len(rows)), "attention": torch.zeros(len(rows))}

        def fit(part):
            standard = (mean_embedding[part].mean(0), mean_embedding[part].std(0).clamp_min(1e-6))
            w, b = fit_mean_head(standardised(mean_embedding[part], standard), y[part], l2,
                                 weight[part])
            if args.mean_only:
                return standard, (w, b, None), (w, b, None)
            if args.learned == "window":
                return standard, (w, b, None), (w, b, ("window", None))
            if args.learned == "mlp":
                learned = fit_mlp(standard, mean_embedding[part], y[part], w, b, l2,
                                  args.mlp_hidden, args.q_l2, args.epochs, args.lr,
                                  weight[part], seed=1)
                return standard, (w, b, None), learned
            if args.learned == "tokens":
                learned = fit_tokens(standard, mean_embedding[part], training, index[part],
                                     y[part], w, b, l2, args.q_l2, args.epochs, args.lr, seed=1)
                return standard, (w, b, None), learned
            wa, ba, q = fit_attention(reader, standard, training, index[part], y[part], w, b,
                                      l2, args.q_l2, args.epochs, args.lr, seed=1)
            return standard, (w, b, None), (wa, ba, q)

        def score(standard, head, states, which, mean_embedded):
            """A head's logits for rows `which` of `states`; `mean_embedded` is their mean
            reading, read once, which a head without a query reads as it is."""
            w, b, q = head
            if isinstance(q, tuple) and q[0] == "window":
                with torch.no_grad():
                    whole = standardised(mean_embedded, standard) @ w + b
                    return torch.maximum(whole, window_max(reader, standard, w, b, states, which,
                                                           args.window))
            if isinstance(q, tuple) and q[0] == "mlp":
                _, first, first_bias, out = q
                x = standardised(mean_embedded, standard)
                return x @ w + b + torch.nn.functional.gelu(x @ first + first_bias) @ out
            if isinstance(q, tuple):  # ("tokens", u): the mean's logit plus the tokens' reading
                with torch.no_grad():
                    return (standardised(mean_embedded, standard) @ w + b
                            + token_pool(states, which, q[1]))
            embedded = mean_embedded if q is None else embed_all(reader, states, which, q)
            return standardised(embedded, standard) @ w + b

        for fold in range(args.folds):
            train_part = torch.nonzero(folds != fold).flatten()
            test_part = torch.nonzero(folds == fold).flatten()
            standard, mean_head, attention_head = fit(train_part)
            for reading, head in (("mean", mean_head), ("attention", attention_head)):
                out_of_fold[reading][test_part] = score(standard, head, training, index[test_part],
                                                        mean_embedding[test_part])
            print(f"{validator}: fold {fold + 1}/{args.folds} ({time.time() - started:.0f} s)",
                  file=sys.stderr)
        standard, mean_head, attention_head = fit(torch.arange(len(rows)))
        q = attention_head[2]
        q = q[1] if isinstance(q, tuple) else q
        print(f"\n## {validator}: {len(rows)} rows, {int(y.sum())} positives"
              + ("" if q is None else f", |{args.learned}| = {q.norm():.2f}"))
        base = [i for i, r in enumerate(rows) if r.get("scored")]
        langs = [r["lang"] for r in rows]
        for reading, head in (("mean", mean_head), ("attention", attention_head)):
            if args.mean_only and reading == "attention":
                flagged[(reading, validator)] = flagged[("mean", validator)]
                scores_of[(reading, validator)] = scores_of[("mean", validator)]
                continue
            oof = out_of_fold[reading]
            if args.line_per_language:
                lines = {lang: threshold_at_budget(
                    oof, benign & torch.tensor([r["lang"] == lang for r in rows]),
                    args.benign_budget) for lang in ("en", "id")}
            else:
                line = threshold_at_budget(oof, benign, args.benign_budget)
                lines = {"en": line, "id": line}

            def line_of(states_rows):
                return torch.tensor([lines.get(r["lang"], lines["en"]) for r in states_rows])

            if args.scores_out:
                # compare-scores.py's input, as `aegis train --scores-out` writes it.
                with open(f"{args.scores_out}-{reading}.jsonl", "a", encoding="utf-8") as out:
                    for r, label, logit in zip(rows, y.tolist(), oof.tolist()):
                        out.write(json.dumps({"validator": validator, "text": r["text"],
                                              "label": bool(label), "score": logit,
                                              "lang": r["lang"], "group": group_of(r)},
                                             ensure_ascii=False) + "\n")
            recall = ((oof >= line_of(rows)) & (y > 0)).sum() / (y > 0).sum()
            base_auc = roc_auc([oof[i].item() for i in base], [y[i].item() for i in base])
            by_lang = " / ".join(
                f"{roc_auc([oof[i].item() for i in range(len(rows)) if langs[i] == lang], [y[i].item() for i in range(len(rows)) if langs[i] == lang]):.3f}"
                for lang in ("en", "id"))
            print(f"{reading}: held-out-source ROC AUC {roc_auc(oof.tolist(), y.tolist()):.3f} "
                  f"(en / id {by_lang}; the shipped files' rows alone, less --unscored, {base_auc:.3f}), "
                  f"recall at the 1% line {recall:.3f}, lines "
                  + " / ".join(f"{v:.2f}" for v in lines.values()))
            if args.by_source:
                groups = collections.defaultdict(list)
                for i, r in enumerate(rows):
                    groups[r["source"]].append(i)
                for source, members in sorted(groups.items()):
                    ys = [y[i].item() for i in members]
                    caught = [oof[i].item() >= line_of([rows[i]])[0].item() for i in members]
                    positives = sum(ys)
                    share = (sum(c for c, t in zip(caught, ys) if t) / positives if positives
                             else sum(caught) / len(caught))
                    # Diluted copies (make-diluted-rows.py) share their row's source; the
                    # source's own rows alone are what a baseline without them is compared on.
                    own = [i for i in members if not rows[i]["id"].endswith(":diluted")]
                    print(f"  {source}: {len(members)} rows, {int(positives)} positives, "
                          f"{'recall' if positives else 'flagged'} {share:.3f}, ROC AUC "
                          f"{roc_auc([oof[i].item() for i in members], ys):.3f} (its own "
                          f"{len(own)} rows {roc_auc([oof[i].item() for i in own], [y[i].item() for i in own]):.3f})")
            second = None
            if (reading == "mean" and reading_states is not None
                    and validator in args.reading_for.split(",")):
                second = train_second_map(args, validator, rows, y, benign, mean_embedding,
                                          reading_states, reading_embedding)
            for name, states in held_sets.items():
                everything = torch.arange(len(states.rows))
                s = score(standard, head, states, everything, held_mean[name]) - line_of(states.rows)
                if second is not None:
                    s = torch.maximum(s, second(held_mean[name]))
                scores_of[(reading, validator)][name] = s
                flagged[(reading, validator)][name] = s >= 0

    print("\n## Held back: share flagged by toxic or harassment, en / id")
    print(f"| set | mean | {args.learned} |\n|---|---|---|")
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
    for folder in sorted({name.split("/")[0] for name in held_sets if name.startswith("ind")}):
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
        print(f"{folder}: mean {cells[0]}, {args.learned} {cells[1]}")
    if "dev-unseen" in held_sets:
        rows = held_sets["dev-unseen"].rows
        for validator in args.validators.split(","):
            labelled = [i for i, r in enumerate(rows) if r["labels"].get(validator) is not None]
            y = [bool(rows[i]["labels"][validator]) for i in labelled]
            cells = [f"{roc_auc([scores_of[(reading, validator)]['dev-unseen'][i].item() for i in labelled], y):.3f}"
                     for reading in ("mean", "attention")]
            print(f"dev-unseen {validator} ROC AUC: mean {cells[0]}, {args.learned} {cells[1]}")
    print(f"\n{time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
