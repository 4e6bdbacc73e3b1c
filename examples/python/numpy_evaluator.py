#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""BOSCH from Python on a planted problem in NumPy.

The "model" has a per-KV-head cost of turning the head into a sliding-window
head, and, in every layer, pairs of heads that back each other up: either
one alone can go local almost for free, both together cost a lot. Ranking
heads one at a time (what static baselines do) therefore picks both heads of
every pair; the search, which scores whole masks, learns to take one of each.

    python examples/python/numpy_evaluator.py --layout 30x9x3 --ratio 0.5 -o mask.json

prints the search's score beside the single-head ranking and the layer
baselines (normalized: 1 = the all-full model, 0 = all heads local) and writes
the mask with its metadata.
"""

import argparse
import time

import numpy as np

import bosch


class PlantedModel:
    """score(mask) = -(sum of the SWA heads' costs) - (penalty of every redundant
    pair whose two heads are both SWA). Higher is better; the all-full mask
    scores 0."""

    def __init__(self, layout, seed=0):
        self.layout = bosch.HeadLayout(layout)
        layers, heads = self.layout.shape
        rng = np.random.default_rng(seed)
        self.cost = rng.uniform(0.1, 1.0, size=(layers, heads))
        # One redundant pair per layer (two KV heads), cheap alone, costly together.
        self.pairs = np.array([rng.choice(heads, size=2, replace=False) for _ in range(layers)])
        self.cost[np.arange(layers), self.pairs[:, 0]] = 0.02
        self.cost[np.arange(layers), self.pairs[:, 1]] = 0.03
        self.penalty = 2.0
        self.calls = 0

    def evaluate(self, mask):
        """`mask`: bool (layers, kv_heads), True = sliding-window head."""
        self.calls += 1
        both = mask[np.arange(len(mask)), self.pairs[:, 0]] & mask[np.arange(len(mask)), self.pairs[:, 1]]
        return -float(self.cost[mask].sum()) - self.penalty * float(both.sum())

    def evaluate_batch(self, masks):
        """`masks`: bool (batch, layers, kv_heads); one score per mask."""
        return [self.evaluate(m) for m in masks]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layout", default="30x9x3", help="layers x query heads x KV heads")
    parser.add_argument("--ratio", type=float, default=0.5, help="fraction of KV heads made SWA")
    parser.add_argument("--seed", type=int, default=0, help="search seed (and the problem's)")
    parser.add_argument("-o", "--out", default=None, help="write the mask here (.json, .tsv or grid)")
    args = parser.parse_args()

    model = PlantedModel(args.layout, args.seed)
    t0 = time.perf_counter()
    result = bosch.select(model, ratio=args.ratio, seed=args.seed)
    seconds = time.perf_counter() - t0

    full = model.evaluate(np.zeros(model.layout.shape, bool))
    swa = model.evaluate(np.ones(model.layout.shape, bool))

    def normalized(mask):
        return (model.evaluate(mask) - swa) / abs(full - swa)

    # The single-head ranking: the score drop when only that head is local.
    drops = np.zeros(model.layout.shape)
    for layer, head in np.ndindex(*model.layout.shape):
        one = np.zeros(model.layout.shape, bool)
        one[layer, head] = True
        drops[layer, head] = full - model.evaluate(one)
    rows = [
        ("BOSCH", result.mask),
        ("single-head ranking", bosch.mask_from_scores(drops, args.ratio)),
        ("RAND (layers)", bosch.layer_rand(model.layout, args.ratio, args.seed)),
        ("BME (layers)", bosch.layer_bme(model.layout, args.ratio)),
        ("INTR (layers)", bosch.layer_intr(model.layout, args.ratio)),
    ]
    print(f"{model.layout}: {result.target_count} of {model.layout.size} KV heads SWA; "
          f"{result.evaluations} evaluations in {seconds:.2f} s")
    print(f"{'mask':<22} {'normalized score':>16}")
    for name, mask in rows:
        print(f"{name:<22} {normalized(mask):>16.4f}")
    print("SWA heads per layer (S = sliding window):")
    print(bosch.to_grid(result.mask), end="")
    if args.out:
        bosch.write_mask(args.out, result, metadata={"model": "planted (examples/python/numpy_evaluator.py)"})
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
