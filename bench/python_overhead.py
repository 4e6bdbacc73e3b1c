#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Search overhead per evaluation through Python, against C++, in one run.

The same search (bosch::select, same seed and options) on the same trivial
objective -- minus the weights of the SWA heads, the evaluator of
bench/search_overhead.cpp -- three ways:

  C++         the evaluator in C++ (bosch._bosch._select_weighted): the search's
              own cost per evaluation, no Python involved;
  Python      the evaluator a Python function (NumPy: -w[mask].sum()) called by
              bosch.select: adds the GIL hand-over, the mask's NumPy array, the
              call, the float conversion and the signal check;
  batch       the same through evaluate_batch (vectorized NumPy, 16 masks a call).

"extra" is Python minus C++ per evaluation; "callable" is the Python function
alone on the same masks (what any evaluator costs in Python), so
"binding" = extra - callable is what the binding itself adds. The weights are
multiples of 1/1024, so every sum is exact and all three runs take the same
path (checked: same log). Times are the best of --repeats runs.

    python bench/python_overhead.py [--repeats 7] [--layouts 30x3,28x8,48x8]
"""

import argparse
import time

import numpy as np

import bosch
from bosch import _bosch


def weights(layers, kv_heads):
    i = np.arange(layers * kv_heads, dtype=np.uint64)
    return ((100 + (i * 2654435761) % 1000) / 1024.0).reshape(layers, kv_heads)


def best(fn, repeats):
    out, t = None, float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        t = min(t, time.perf_counter() - t0)
    return out, t


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--layouts", default="30x3,28x8,48x8", help="LxHkv, comma-separated")
    parser.add_argument("--variants", default="full,layer")
    args = parser.parse_args()

    print(f"bosch {bosch.__version__}; microseconds per evaluation, best of {args.repeats}")
    header = f"{'layout':>7} {'variant':>7} {'evals':>6} {'C++':>8} {'Python':>8} {'extra':>8} " \
             f"{'callable':>8} {'binding':>8} {'batch':>8}"
    print(header)
    for text in args.layouts.split(","):
        layers, kv = (int(x) for x in text.split("x"))
        w = weights(layers, kv)
        layout = bosch.HeadLayout(layers, kv, kv)

        def evaluate(mask):
            return -float(w[mask].sum())

        def evaluate_batch(masks):
            return -(masks * w).sum(axis=(1, 2))

        for variant in args.variants.split(","):
            opts = dict(seed=1, variant=variant)
            ref, t_cpp = best(lambda: _bosch._select_weighted(w, 0.5, **opts), args.repeats)
            py, t_py = best(lambda: bosch.select(evaluate, layout, 0.5, **opts), args.repeats)
            bt, t_batch = best(lambda: bosch.select(None, layout, 0.5, evaluate_batch=evaluate_batch, **opts),
                               args.repeats)
            scores = [e.score for e in ref.log]
            if [e.score for e in py.log] != scores or [e.score for e in bt.log] != scores:
                raise SystemExit(f"{text} {variant}: the runs took different paths")
            masks = list(py.log_arrays()["masks"])
            _, t_call = best(lambda: [evaluate(m) for m in masks], args.repeats)
            n = ref.evaluations
            us = [t * 1e6 / n for t in (t_cpp, t_py, t_call, t_batch)]
            print(f"{text:>7} {variant:>7} {n:>6} {us[0]:>8.2f} {us[1]:>8.2f} {us[1] - us[0]:>8.2f} "
                  f"{us[2]:>8.2f} {us[1] - us[0] - us[2]:>8.2f} {us[3]:>8.2f}")


if __name__ == "__main__":
    main()
