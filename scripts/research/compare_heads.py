#!/usr/bin/env python3
"""Compares head designs on the encoder features `aegis train` cached, on folds that hold out
whole sources (the same grouping as `aegis train`), with random folds beside.

Not part of the product: a research aid for choices `aegis train` cannot express (an MLP head,
concatenations of layers at several strengths). Run `scripts/train-heads.sh
--dry-run --layers 4,8,12,16,20,embedding` once first: it caches every training row's
embedding and its mean after layers 1 to 20 in ~/.cache/aegis/features.

    pip install numpy scikit-learn
    python3 scripts/research/compare_heads.py toxic 8,12,16,emb,12+emb [--mlp 12,emb]

A candidate is a layer, `emb` (the sentence embedding) or a `+`-joined concatenation. Figures are
ROC AUC overall / en / id of logistic regression (standardised, balanced classes, C 0.003 and
0.01) and, with --mlp, a one-hidden-layer MLP (64 units, alpha 1; 128 units, alpha 10).
"""
import argparse
import hashlib
import json
import os
import struct
import warnings

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.neural_network import MLPClassifier
from sklearn.preprocessing import StandardScaler

ROOT = os.path.join(os.path.dirname(__file__), '..', '..', 'prompt_guard', 'heads')
FILES = ['dev-permissive.jsonl', 'train-1.jsonl', 'train-2.jsonl', 'authored.jsonl',
         'authored-benign.jsonl', 'benign-real.jsonl']
CACHE = os.path.expanduser(os.environ.get('AEGIS_FEATURE_CACHE', '~/.cache/aegis/features'))
# What the cache key of an EmbeddingGemma feature row holds (crates/aegis-guard/src/training.rs).
PROMPT = 'task: classification | query: '
# The encoder's weight format string (`EncoderInfo::weight_format`): `scripts/train-heads.sh`
# reads with `--encoder-weights precise`, whose string names the kernels the CPU ran; set
# AEGIS_FEATURE_FORMAT to the string of another CPU (AVX2: 'f32 layers (avx2-fma kernels), ...').
FORMAT = os.environ.get('AEGIS_FEATURE_FORMAT',
                        'bf16 layers (avx512-bf16 kernels), Q8_0 embedding, window ±256')
PREAMBLE = ("<start_of_turn>user\nA message sent to a chat assistant, to be checked against "
            "safety policies:\n\n")


def encoder_hash():
    with open(os.path.join(ROOT, 'toxic.json')) as f:
        return json.load(f)['model']['content_hash']


def cache_path(text, weights):
    h = hashlib.sha256()
    for part in (b'encoder', weights.encode(), PROMPT.encode(), FORMAT.encode(),
                 PREAMBLE.encode(), text.encode()):
        h.update(part)
    key = h.hexdigest()
    return os.path.join(CACHE, key[:2], key + '.l.bin')


def read_rows(path):
    with open(path, 'rb') as f:
        raw = f.read()
    assert raw[:8] == b'AEGISL01', path
    rows, width = struct.unpack('<II', raw[8:16])
    return np.frombuffer(raw[16:], dtype='<f4').reshape(rows, width)


def group(row):
    """LabelledMessage::source_group: authored rows by language and kind, others by source."""
    source = row.get('source') or '(no source)'
    if not source.startswith('aegis_'):
        return source
    positives = sorted(k for k, v in row['labels'].items() if v is True)
    kind = row.get('kind') or ('benign' if not positives else '+'.join(positives))
    return f"{source}:{row.get('lang') or 'en'}:{kind}"


def source_folds(labels, groups, k=5):
    """aegis-heads' source_folds: groups with positives dealt first, largest first, to the fold
    with the fewest positives; negative-only groups to the fold with the fewest rows."""
    positives, rows = {}, {}
    for label, g in zip(labels, groups):
        positives[g] = positives.get(g, 0) + int(label)
        rows[g] = rows.get(g, 0) + 1
    fold_positives, fold_rows, fold = [0] * k, [0] * k, {}
    for g in sorted((g for g in rows if positives[g]), key=lambda g: (-positives[g], g)):
        f = min(range(k), key=lambda i: (fold_positives[i], i))
        fold[g] = f
        fold_positives[f] += positives[g]
        fold_rows[f] += rows[g]
    for g in sorted((g for g in rows if not positives[g]), key=lambda g: (-rows[g], g)):
        f = min(range(k), key=lambda i: (fold_rows[i], i))
        fold[g] = f
        fold_rows[f] += rows[g]
    return np.array([fold[g] for g in groups])


def out_of_fold(make, x, y, folds):
    scores = np.zeros(len(y))
    for f in range(folds.max() + 1):
        train, test = folds != f, folds == f
        scaler = StandardScaler().fit(x[train])
        model = make().fit(scaler.transform(x[train]), y[train])
        scores[test] = model.predict_proba(scaler.transform(x[test]))[:, 1]
    return scores


def auc_line(scores, y, langs):
    parts = [f'{roc_auc_score(y, scores):.3f}']
    for lang in ('en', 'id'):
        m = langs == lang
        if y[m].sum() >= 5 and (~y[m]).sum() >= 5:
            parts.append(f'{lang} {roc_auc_score(y[m], scores[m]):.3f}')
    return ' / '.join(parts)


def parse(candidate):
    return tuple(0 if part == 'emb' else int(part) for part in candidate.split('+'))


def main():
    warnings.filterwarnings('ignore')
    ap = argparse.ArgumentParser()
    ap.add_argument('validator')
    ap.add_argument('candidates')
    ap.add_argument('--mlp', default='')
    args = ap.parse_args()
    weights = encoder_hash()
    rows = []
    for name in FILES:
        with open(os.path.join(ROOT, name)) as f:
            rows += [json.loads(line) for line in f if line.strip()]
    rows = [r for r in rows if r['labels'].get(args.validator) is not None]
    paths = [cache_path(r['text'], weights) for r in rows]
    missing = sum(not os.path.exists(p) for p in paths)
    if missing:
        raise SystemExit(f'{missing} of {len(rows)} rows have no cached features: run '
                         'scripts/train-heads.sh --dry-run --layers 4,8,12,16,20,embedding first')
    features = [read_rows(p) for p in paths]  # row 0: embedding; row l: mean after layer l
    y = np.array([bool(r['labels'][args.validator]) for r in rows])
    langs = np.array([r.get('lang') or 'en' for r in rows])
    folds = source_folds(y, [group(r) for r in rows])
    random_folds = np.random.RandomState(0).randint(0, 5, len(y))
    print(f'{args.validator}: {len(y)} rows, {y.sum()} positives; ROC AUC all / en / id, '
          'held-out sources then random folds', flush=True)

    def matrix(candidate):
        return np.concatenate([np.stack([f[layer] for f in features]) for layer in candidate],
                              axis=1).astype(np.float64)

    def measure(name, make, x):
        print(f'  {name:<26} sources {auc_line(out_of_fold(make, x, y, folds), y, langs)}'
              f'   random {auc_line(out_of_fold(make, x, y, random_folds), y, langs)}', flush=True)

    for candidate in args.candidates.split(','):
        x = matrix(parse(candidate))
        for c in (0.003, 0.01):
            measure(f'logistic {candidate} C={c}',
                    lambda: LogisticRegression(C=c, class_weight='balanced', max_iter=2000), x)
    for candidate in filter(None, args.mlp.split(',')):
        x = matrix(parse(candidate))
        for hidden, alpha in ((64, 1.0), (128, 10.0)):
            measure(f'mlp{hidden} {candidate}',
                    lambda: MLPClassifier(hidden_layer_sizes=(hidden,), alpha=alpha,
                                          max_iter=60, random_state=0), x)


if __name__ == '__main__':
    main()
