#!/usr/bin/env python3
# The per-draw table of a draws folder (this one, or the folder given:
# `python3 ../draws-0.75/table.py .` in probe-all-0.75 and the others): each draw's
# calibration score and cost, its held-out log-prob and accuracy (95% bootstrap
# intervals over 16 samples per task) at 512 and 1024 tokens, the spread of the
# draws, and how well the calibration score orders them (Spearman).
import json, pathlib, statistics, sys
here = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path(__file__).parent
rows = []
for seed in range(8):
    f = here / f'draw-task{seed}.json'
    if not f.exists(): continue
    m = json.load(open(f))['metadata']
    row = {'seed': seed, 'score': m['score'], 'forwards': m['forwards'], 'evaluations': m['evaluations']}
    for ctx in (512, 1024):
        h = here / f'draw-task{seed}-held-out-{ctx}.json'
        if h.exists():
            a = json.load(open(h))['held_out']['all']
            row[ctx] = (a['mean_logprob'], a['logprob_ci'], a['accuracy'], a['accuracy_ci'])
    sel = here / f'draw-task{seed}-selection-512.json'
    if sel.exists():
        row['selection'] = json.load(open(sel))['held_out']['all']['mean_logprob']
    rows.append(row)
print('| task seed | calibration score | selection score | sample forwards | held-out log-prob, 512 | accuracy, 512 | held-out log-prob, 1024 | accuracy, 1024 |')
print('|---:|---:|---:|---:|---:|---:|---:|---:|')
fmt = lambda v: f"{v[0]:.3f} [{v[1][0]:.3f}, {v[1][1]:.3f}] | {v[2]:.3f} [{v[3][0]:.3f}, {v[3][1]:.3f}]" if v else '| '
for r in rows:
    sel = f"{r['selection']:.4f}" if 'selection' in r else ''
    print(f"| {r['seed']} | {r['score']:.4f} | {sel} | {r['forwards']:.1f} | {fmt(r.get(512))} | {fmt(r.get(1024))} |")
ref = here / 'draw-task0-held-out-1024.json'
if ref.exists():
    for name, v in json.load(open(ref))['references'].items():
        a = v['all'] if 'all' in v else v['held_out']['all']
        print(f"\n{name} at 1024: log-prob {a['mean_logprob']:.3f}, accuracy {a['accuracy']:.3f}")
def rank(xs):
    order = sorted(range(len(xs)), key=lambda i: xs[i]); r = [0] * len(xs)
    for k, i in enumerate(order): r[i] = k
    return r
for ctx in (512, 1024):
    done = [r for r in rows if ctx in r]
    if len(done) < 2: continue
    lp = [r[ctx][0] for r in done]
    print(f"\n{ctx} tokens: {len(done)} draws, log-prob spread (best - worst) {max(lp) - min(lp):.3f}, mean {statistics.fmean(lp):.3f}")
    if len(done) >= 3:
        a, b = rank([r['score'] for r in done]), rank(lp)
        n = len(done); d2 = sum((x - y) ** 2 for x, y in zip(a, b))
        print(f"Spearman(calibration score, held-out log-prob) = {1 - 6 * d2 / (n * (n * n - 1)):.2f}")
        if all('selection' in r for r in done):
            a = rank([r['selection'] for r in done]); d2 = sum((x - y) ** 2 for x, y in zip(a, b))
            best = max(done, key=lambda r: r['selection'])
            print(f"Spearman(selection score, held-out log-prob) = {1 - 6 * d2 / (n * (n * n - 1)):.2f}; "
                  f"the selection picks task seed {best['seed']} ({best[ctx][0]:.3f}; best draw {max(lp):.3f})")
