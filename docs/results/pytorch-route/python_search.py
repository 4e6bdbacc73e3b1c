# SPDX-License-Identifier: Apache-2.0
"""The main job's search driven from Python over the PyTorch route, beside
the same search over bosch's C++ evaluator, in one run: the same samples
(HFEvaluator.like), the same options (scripts/main-job-fast.cfg), the same
seed; then both masks (and all-full, and the layer baselines) scored on the
held-out split by the C++ evaluator, with a paired interval.

    python python_search.py MODEL.gguf OUT.json [--seed 1] [--ratio 0.5]

Both searches race (Options.race) and report their cost in sample forwards
(the C++ evaluator's residual cache makes a forward restarted at layer l of
L count (L - l) / L; the PyTorch route runs every forward whole).
"""

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np
import torch

import bosch
import bosch.hf

MAIN_JOB = dict(race=True, probe_samples=2, chunk_budget=4, refine_budget=10, lambda_=2)


def paired(a, b):
    """Mean of a - b with a 95% t interval (per-sample paired differences)."""
    d = np.asarray(a) - np.asarray(b)
    n = len(d)
    # Student's t, 97.5% quantile, by degrees of freedom
    t975 = {7: 2.365, 11: 2.201, 15: 2.131, 23: 2.069, 31: 2.040, 47: 2.012, 63: 1.998}.get(n - 1, 1.96)
    half = t975 * d.std(ddof=1) / np.sqrt(n)
    return {"mean": float(d.mean()), "lo": float(d.mean() - half), "hi": float(d.mean() + half), "n": n}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ratio", type=float, default=0.5)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    os.environ.setdefault("TQDM_DISABLE", "1")
    torch.set_num_threads(args.threads)

    cpp = bosch.TransformerEvaluator(str(args.model), context=512, window=64, samples=2, held_out_samples=4,
                                     precision="fp32", threads=args.threads)
    out = {"model": args.model.name, "ratio": args.ratio, "seed": args.seed, "options": {
        k.rstrip("_"): v for k, v in MAIN_JOB.items()}, "context": 512, "window": 64, "sinks": cpp.sinks,
        "calibration_samples": cpp.calibration_samples, "threads": args.threads,
        "torch": torch.__version__}
    runs = {}
    t = time.perf_counter()
    r = bosch.select(cpp, None, args.ratio, seed=args.seed, **MAIN_JOB)
    runs["cpp"] = (r, time.perf_counter() - t)
    print(f"C++ search: {runs['cpp'][1]:.0f} s, {r.forwards:.1f} forwards", file=sys.stderr, flush=True)

    hf = bosch.hf.HFEvaluator.like(cpp, str(args.model.parent), gguf_file=args.model.name)
    t = time.perf_counter()
    r = bosch.select(hf, None, args.ratio, seed=args.seed, **MAIN_JOB)
    runs["python"] = (r, time.perf_counter() - t)
    print(f"Python search: {runs['python'][1]:.0f} s, {r.forwards:.1f} forwards", file=sys.stderr, flush=True)
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    for name, (r, seconds) in runs.items():
        out[name] = {"seconds": seconds, "forwards": r.forwards, "evaluations": r.evaluations,
                     "eliminated": r.eliminated, "calibration_score": r.score,
                     "mask": bosch.to_grid(r.mask)}
    a, b = runs["cpp"][0].mask, runs["python"][0].mask
    out["jaccard_distance"] = bosch.jaccard_distance(a, b)

    # Held-out: every mask scored by the C++ evaluator on the same held-out samples.
    masks = {"cpp": a, "python": b, "all-full": np.zeros_like(a),
             "layer-intr": bosch.layer_intr(cpp.layout, args.ratio), "layer-bme": bosch.layer_bme(cpp.layout, args.ratio)}
    held = {name: cpp.held_out(m) for name, m in masks.items()}
    out["held_out"] = held
    # Per-sample held-out scores (the PyTorch route, which agrees with C++
    # within 1e-5 nats), for paired intervals.
    ho = bosch.hf.HFEvaluator.like(cpp, str(args.model.parent), gguf_file=args.model.name, split="held_out")
    per = {name: ho.sample_scores(m).tolist() for name, m in masks.items()}
    out["held_out_per_sample"] = per
    out["paired"] = {f"{x} - {y}": paired(per[x], per[y]) for x, y in
                     (("python", "cpp"), ("cpp", "layer-intr"), ("python", "layer-intr"), ("cpp", "all-full"),
                      ("python", "all-full"))}
    json.dump(out, open(args.out, "w"), indent=1)
    for name, rep in held.items():
        print(f"{name:10s} held-out mean logprob {rep['all']['mean_logprob']:.4f} accuracy {rep['all']['accuracy']:.3f}",
              file=sys.stderr)


if __name__ == "__main__":
    main()
