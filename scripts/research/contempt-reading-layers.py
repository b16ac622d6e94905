#!/usr/bin/env python3
"""Issue 40: toxic's contempt reading on other readings of the encoder than its sentence
embedding (the mean of the residual stream after layer 12, 16 or 20, alone or beside the
embedding). Not part of the product: it approximates `aegis train --reading` (logistic
regression, its strength on random folds, its line at 0.2% of the benign rows on folds of whole
sources) on the features `aegis train` caches, and reports each held-back file's contempt caught
by the reading alone and together with the shipped toxic map, and the benign rows flagged.

    scripts/train-heads.sh toxic --dry-run --layers 8,12,16,20,embedding   # caches the rows
    aegis train toxic --dry-run --layers 8,12,16,20,embedding --data H/...-holdout.jsonl ...
    python3 scripts/research/contempt-reading-layers.py emb,12,16,20,16+emb,20+emb
"""
import json
import os
import sys
import warnings

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, os.path.dirname(__file__))
from compare_heads import FILES, ROOT, cache_path, encoder_hash, group, parse, read_rows, source_folds  # noqa: E402

HOLDOUTS = ['kinds-holdout', 'contempt-holdout', 'contempt-holdout-3', 'contempt-holdout-4',
            'contempt-holdout-5']
BENIGN = ['benign-real-holdout', 'benign-holdout']
BUDGET = 0.002


def load(name):
    with open(os.path.join(ROOT, name + '.jsonl')) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    warnings.filterwarnings('ignore')
    weights = encoder_hash()
    head = json.load(open(os.path.join(ROOT, 'toxic.json')))
    main_w, main_b, main_t = np.array(head['weights']), head['bias'], head['training']['threshold']

    def features(rows):
        return [read_rows(cache_path(r['text'], weights)) for r in rows]

    head_rows = [r for name in FILES for r in load(name.removesuffix('.jsonl'))]
    negatives = [r for r in head_rows if r['labels'].get('toxic') is False]
    own = [r for r in load('authored-contempt') if r['labels'].get('toxic') is not None]
    rows = own + negatives
    y = np.array([bool(r['labels']['toxic']) for r in rows])
    feats = features(rows)
    folds = source_folds(y, [group(r) for r in rows])
    random_folds = np.random.RandomState(0).randint(0, 5, len(y))
    held = {name: load(name) for name in HOLDOUTS + BENIGN}
    held_feats = {name: features(rs) for name, rs in held.items()}

    def main_fails(fs):
        emb = np.stack([f[0] for f in fs]).astype(np.float64)
        return 1 / (1 + np.exp(-(emb @ main_w + main_b))) >= main_t

    print(f'reading rows: {y.sum()} contempt, {len(y) - y.sum()} not toxic; line at {BUDGET:.1%} '
          'of them on folds of whole sources')
    for candidate in sys.argv[1].split(','):
        layers = parse(candidate)

        def matrix(fs):
            return np.concatenate([np.stack([f[layer] for f in fs]) for layer in layers],
                                  axis=1).astype(np.float64)

        x = matrix(feats)

        def oof(c, fold_ids):
            scores = np.zeros(len(y))
            for f in range(fold_ids.max() + 1):
                train, test = fold_ids != f, fold_ids == f
                scaler = StandardScaler().fit(x[train])
                model = LogisticRegression(C=c, max_iter=3000).fit(scaler.transform(x[train]),
                                                                    y[train])
                scores[test] = model.predict_proba(scaler.transform(x[test]))[:, 1]
            return scores

        best = max((roc_auc_score(y, oof(c, random_folds)), c) for c in (0.001, 0.01, 0.1))
        c = best[1]
        by_source = oof(c, folds)
        line = np.quantile(by_source[~y], 1 - BUDGET)
        scaler = StandardScaler().fit(x)
        model = LogisticRegression(C=c, max_iter=3000).fit(scaler.transform(x), y)

        def reads(name):
            return model.predict_proba(scaler.transform(matrix(held_feats[name])))[:, 1] > line

        print(f'== {candidate}: C {c}, random-fold ROC AUC {best[0]:.3f}, held-out-source '
              f'{roc_auc_score(y, by_source):.3f}, line {line:.3f}')
        for name in HOLDOUTS:
            rs, said, shipped = held[name], reads(name), main_fails(held_feats[name])
            parts = []
            for kind in ('polite-contempt', 'civil-criticism', 'group-mention'):
                for lang in ('en', 'id'):
                    idx = [i for i, r in enumerate(rs) if r.get('kind') == kind and r['lang'] == lang]
                    if idx:
                        parts.append(f'{kind[:8]} {lang} {sum(said[i] or shipped[i] for i in idx)}'
                                     f'/{len(idx)} (alone {sum(said[i] for i in idx)})')
            print(f'  {name:20} ' + '; '.join(parts))
        for name in BENIGN:
            said, shipped = reads(name), main_fails(held_feats[name])
            print(f'  {name:20} flagged by toxic {np.mean(said | shipped):.1%} '
                  f'(the map alone {np.mean(shipped):.1%}, the reading alone {np.mean(said):.1%})')


if __name__ == '__main__':
    main()
