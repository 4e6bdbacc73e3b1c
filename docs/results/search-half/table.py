#!/usr/bin/env python3
# The tables of README.md from the searches and held-out reports here (run
# from the repository root after the commands in commands.txt).
import json, math, pathlib, statistics, subprocess
R = pathlib.Path('docs/results')
H = R / 'search-half'
# all-full's greedy accuracy on the same 1024-token held-out set (docs/results/search-cost/table.md)
ALL_FULL_1024 = 0.953
# (config, rho, task seed, search seed) -> file stem; the main job's task-seed-0 draws are in other folders.
runs = {('main', '0.5', 0, 0): R / 'search-cost/prefix-0.5',
        ('main', '0.75', 0, 0): R / 'search-cost/prefix-0.75',
        ('main', '0.75', 0, 1): R / 'prefix-draws/prefix-true-seed1',
        ('half', '0.5', 0, 0): H / 'half-0.5-seed0',
        ('half', '0.75', 0, 0): H / 'half-0.75-seed0',
        ('half', '0.75', 0, 1): H / 'half-0.75-seed1'}
for f in sorted(H.glob('*-task?.json')):
    if 'held-out' in f.name: continue
    c, rho, t = f.stem.split('-')
    runs[(c, rho, int(t[4:]), 0)] = f.with_suffix('')
CONFIGS = ('main', 'half', 'half10')
former = {'0.5': R / 'search-cost/old-0.5', '0.75': R / 'search-cost/old-0.75'}

def report(stem, context):
    p = pathlib.Path(f'{stem}-held-out-{context}.json')
    return p if p.exists() else None

def paired(a, b):
    out = subprocess.run(['build/apps/bosch', 'paired', '--json', str(a), str(b)], capture_output=True, text=True)
    if out.returncode != 0: raise SystemExit(out.stderr)
    return json.loads(out.stdout)['all']

def fmt(d, scale=1.0, digits=3):
    return f"{scale * d['mean']:+.{digits}f} [{scale * d['ci'][0]:+.{digits}f}, {scale * d['ci'][1]:+.{digits}f}]"

def t_interval(xs):
    n = len(xs)
    mu = statistics.fmean(xs)
    if n < 2: return f"{mu:+.3f} (one draw)"
    t = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571}[n - 1]
    hw = t * statistics.stdev(xs) / math.sqrt(n)
    return f"{mu:+.3f} [{mu - hw:+.3f}, {mu + hw:+.3f}]"

print('| config | rho | task seed | search seed | calibration | evaluations (+ partial) | sample forwards | held-out log-prob 512 | acc 512 | minus former, 512: log-prob [95% CI] | log-prob 1024 | acc 1024 / all-full |')
print('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
draws = {}
for key, stem in sorted(runs.items()):
    c, rho, ts, ss = key
    h512 = report(stem, 512)
    if h512 is None: continue
    m = json.load(open(f'{stem}.json'))['metadata']
    h = json.load(open(h512))['held_out']['samples']
    lp, ac = statistics.fmean(h['logprob']), statistics.fmean(h['accuracy'])
    d = paired(h512, f'{former[rho]}-held-out-512.json')['logprob']
    # Runs before 75a9e8d counted no prefix passes: 32 layer applications = 1.07 forwards.
    fw = m['forwards'] + (0 if stem.parent == H else 1.07)
    l1024 = a1024 = ''
    if (h1024 := report(stem, 1024)) is not None:
        h2 = json.load(open(h1024))['held_out']['samples']
        acc = statistics.fmean(h2['accuracy'])
        l1024, a1024 = f"{statistics.fmean(h2['logprob']):.3f}", f"{acc:.3f} / {ALL_FULL_1024} = {acc / ALL_FULL_1024:.2f}"
    print(f"| {c} | {rho} | {ts} | {ss} | {m['score']:.3f} | {m['evaluations']} (+{m['eliminated']}) | {fw:.1f} | "
          f"{lp:.3f} | {ac:.3f} | {fmt(d)} | {l1024} | {a1024} |")
    draws[key] = (fw, lp, ac, d['mean'], h512)

print()
print('A cheaper configuration minus main on the same held-out samples (512 tokens), per calibration draw (task seed; search seed 0), and over the draws:')
print()
print('| config | rho | task seed | log-prob [95% CI] | accuracy points [95% CI] | sample forwards / main\'s |')
print('|---|---:|---:|---:|---:|---:|')
for c in CONFIGS[1:]:
    for rho in ('0.5', '0.75'):
        lps, acs = [], []
        for ts in range(0, 10):
            a, b = draws.get((c, rho, ts, 0)), draws.get(('main', rho, ts, 0))
            if a is None or b is None: continue
            d = paired(a[4], b[4])
            lps.append(d['logprob']['mean']); acs.append(100 * d['accuracy']['mean'])
            print(f"| {c} | {rho} | {ts} | {fmt(d['logprob'])} | {fmt(d['accuracy'], 100, 1)} | {a[0]:.1f} / {b[0]:.1f} = {a[0] / b[0]:.2f} |")
        if lps:
            print(f"| {c} | {rho} | mean of {len(lps)} (t 95%) | {t_interval(lps)} | {t_interval(acs)} | |")

print()
print('Every draw of each configuration (held-out log-prob at 512 tokens; the half search logs the same masks for search seeds 0 and 1, so its seed-1 run is not a draw):')
print()
print('| config | rho | draws | sample forwards (mean, range) | held-out log-prob, mean over draws [t 95% CI] | minus former [t 95% CI] | accuracy (mean) |')
print('|---|---:|---:|---:|---:|---:|---:|')
for c in CONFIGS:
    for rho in ('0.5', '0.75'):
        v = [x for k, x in draws.items() if k[0] == c and k[1] == rho and not (c == 'half' and k[3] == 1)]
        if not v: continue
        print(f"| {c} | {rho} | {len(v)} | {statistics.fmean(x[0] for x in v):.1f} ({min(x[0] for x in v):.1f}-{max(x[0] for x in v):.1f}) | {t_interval([x[1] for x in v])} | "
              f"{t_interval([x[3] for x in v])} | {statistics.fmean(x[2] for x in v):.3f} |")
