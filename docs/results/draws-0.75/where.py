#!/usr/bin/env python3
# Where the draws differ (run from this folder): per-layer SWA counts of each
# final mask, the SWA heads two draws share, and Stage 1's measured drop of
# layer 8 (the layer the good draws keep entirely full) with each draw's
# largest drops.
import json, itertools
draws = {s: json.load(open(f'draw-task{s}.json')) for s in range(4)}
for s, d in draws.items():
    drops = d['metadata']['layer_drops']
    top = sorted(range(len(drops)), key=lambda l: -drops[l])[:4]
    print(f"task seed {s}: SWA heads per layer {''.join(str(len(h)) for h in d['swa'])}; "
          f"layer 8 drop {drops[8]:+.3f}; largest drops " + ', '.join(f'{l}: {drops[l]:.3f}' for l in top))
sets = {s: {(l, h) for l, hs in enumerate(d['swa']) for h in hs} for s, d in draws.items()}
for a, b in itertools.combinations(sets, 2):
    print(f"task seeds {a} and {b} share {len(sets[a] & sets[b])} of {len(sets[a])} SWA heads")
