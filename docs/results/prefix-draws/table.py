#!/usr/bin/env python3
# The table of README.md from the searches and held-out reports here (run from the repository root).
import json, subprocess, statistics, pathlib
R = pathlib.Path('docs/results')
rows = [('former default (1 x 512), fp32', 'search-cost/old-0.75'),
        ('main job, fp32, full rows', 'search-cost/new-0.75'),
        ('main job, fp32, shared prefix', 'prefix-draws/fp32-prefix-true-seed0'),
        ('main job, bf16, full rows', 'prefix-draws/prefix-false-seed0'),
        ('main job, bf16, shared prefix', 'search-cost/prefix-0.75'),
        ('main job, bf16, shared prefix, seed 1', 'prefix-draws/prefix-true-seed1'),
        ('main job, bf16, full rows, seed 1', 'prefix-draws/prefix-false-seed1')]
print('| search | seed | calibration score | evaluations | sample forwards | held-out log-prob at 512 | accuracy | minus former: log-prob [95% CI] | accuracy points [95% CI] |')
print('|---|---:|---:|---:|---:|---:|---:|---:|---:|')
for name, f in rows:
    if not (R / (f + '-held-out-512.json')).exists(): continue
    m = json.load(open(R / (f + '.json')))['metadata']
    h = json.load(open(R / (f + '-held-out-512.json')))['held_out']['samples']
    d = json.loads(subprocess.run(['build/apps/bosch', 'paired', '--json', str(R / (f + '-held-out-512.json')),
                        str(R / 'search-cost/old-0.75-held-out-512.json')], capture_output=True, text=True).stdout or '{}')
    diff = ' | '
    if f != 'search-cost/old-0.75':
        lp = d['all']['logprob']; ac = d['all']['accuracy']
        diff = f"{lp['mean']:+.3f} [{lp['ci'][0]:+.3f}, {lp['ci'][1]:+.3f}] | {100*ac['mean']:+.1f} [{100*ac['ci'][0]:+.1f}, {100*ac['ci'][1]:+.1f}]" 
    print(f"| {name} | {m['seed']} | {m['score']:.3f} | {m['evaluations']} | {m['forwards']:.1f} | {statistics.fmean(h['logprob']):.3f} | {statistics.fmean(h['accuracy']):.3f} | {diff} |")
