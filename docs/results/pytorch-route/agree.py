#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The PyTorch route against bosch's C++ forward on the same samples:
    python docs/results/pytorch-route/agree.py MODEL.gguf CONTEXT [WINDOW]
(MODEL in ~/.cache/bosch/models). Prints, for all-full, a seeded random mask
at rho 0.5 and all-SWA, the C++ evaluator's score (fp32), bosch.hf's on the
same samples, and their difference (nats), with the time each took."""
import os
import sys
import time

import numpy as np
import torch

import bosch
import bosch.hf

os.environ["TQDM_DISABLE"] = "1"
torch.set_num_threads(2)
model_file, context = sys.argv[1], int(sys.argv[2])
window = int(sys.argv[3]) if len(sys.argv) > 3 else 64
path = os.path.expanduser("~/.cache/bosch/models/" + model_file)
e = bosch.TransformerEvaluator(path, context=context, precision="fp32", window=window, sinks=4, samples=1)
t = time.time()
h = bosch.hf.HFEvaluator.like(e, os.path.dirname(path), gguf_file=model_file)
print(f"{model_file}, context {context}, window {window}: transformers load {time.time() - t:.1f} s; "
      f"samples {len(h.samples)} of {[len(p) + len(a) for p, a in h.samples]} tokens")
rng = np.random.default_rng(0)
L = e.layout
for name, m in (("all-full", np.zeros(L.shape, bool)), ("rho 0.5", rng.random(L.shape) < 0.5),
                ("all-swa", np.ones(L.shape, bool))):
    t = time.time()
    c = e.evaluate(m)
    tc = time.time() - t
    t = time.time()
    hs = h.sample_scores(m)
    th = time.time() - t
    print(f"{name}: bosch {c:.6f} ({tc:.1f} s)  hf {hs.mean():.6f} ({th:.1f} s)  diff {abs(c - hs.mean()):.2e}",
          flush=True)
