#!/usr/bin/env python3
# Issue 51: what layer 8 is worth in the best draw's mask (draws-0.75 task
# seed 1), held out at 512 tokens (16 samples per task, task seed 11):
# the mask with layer 8 entirely SWA, and with layer 8's SWA heads as the
# worst draw (task seed 3) has them, each against the draw's own mask, per
# sample. Run from this folder.
import collections, json
base = json.load(open('../draws-0.75/draw-task1-held-out-512.json'))['held_out']['samples']
for name in ('draw1-layer8-swa', 'draw1-layer8-as-draw3'):
    s = json.load(open(f'{name}-held-out-512.json'))['held_out']['samples']
    d = [y - x for x, y in zip(base['logprob'], s['logprob'])]
    by = collections.defaultdict(list)
    for t, x in zip(base['task'], d):
        by[t].append(x)
    print(f"{name}: mask log-prob {sum(s['logprob']) / len(d):.3f} (draw 1: {sum(base['logprob']) / len(d):.3f}); "
          f"paired difference {sum(d) / len(d):+.3f}, {sum(x < -0.3 for x in d)} of {len(d)} samples lose more than 0.3; "
          + ', '.join(f"{t} {sum(v) / len(v):+.2f}" for t, v in by.items()))
