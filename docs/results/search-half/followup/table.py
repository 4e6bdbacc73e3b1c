#!/usr/bin/env python3
# The tables of followup/README.md from the files here and in the folders
# they compare with (run from the repository root after commands.txt).
import json, math, pathlib, statistics, subprocess
ALL_FULL_1024 = 0.953  # all-full's greedy accuracy on the 1024-token held-out set (../table.md)
R = pathlib.Path('docs/results')
H = R / 'search-half'
F = H / 'followup'
P = H / 'plans'

def meta(stem):
    return json.load(open(f'{stem}.json'))['metadata']

def held(stem):
    p = pathlib.Path(f'{stem}-held-out-512.json')
    if not p.exists(): return None
    return json.load(open(p))['held_out']['all']

def paired(a, b):
    out = subprocess.run(['build/apps/bosch', 'paired', '--json', f'{a}-held-out-512.json', f'{b}-held-out-512.json'],
                         capture_output=True, text=True)
    if out.returncode != 0: raise SystemExit(out.stderr)
    d = json.loads(out.stdout)['all']['logprob']
    return f"{d['mean']:+.3f} [{d['ci'][0]:+.3f}, {d['ci'][1]:+.3f}]"

def main_stem(rho, t):
    if t == 0: return R / f'search-cost/prefix-{rho}'
    return H / f'main-{rho}-task{t}'

def last(stem):
    rows = [json.loads(l) for l in open(f'{stem}.jsonl')]
    r = rows[-1]
    return f"{'stopped at ' + str(r['samples']) if r.get('eliminated') else 'full'}"

print('### The surrogate\'s proposal raced (rho 0.5, main-job-fast.cfg, avx512-bf16)\n')
print('| task seed | sample forwards before | after | same mask | same log but the proposal | proposal |')
print('|---:|---:|---:|---|---|---|')
after = []
for t in range(3):
    new, old = F / f'fast-0.5-task{t}', H / f'half10-0.5-task{t}'
    a = [json.loads(l) for l in open(f'{new}.jsonl')]
    b = [json.loads(l) for l in open(f'{old}.jsonl')]
    same = len(a) == len(b) and all(x['mask'] == y['mask'] and x['score'] == y['score'] for x, y in zip(a[:-1], b[:-1]))
    mn, mo = meta(new), meta(old)
    after.append(mn['forwards'])
    print(f"| {t} | {mo['forwards']:.1f} | {mn['forwards']:.1f} | "
          f"{json.load(open(f'{new}.json'))['swa'] == json.load(open(f'{old}.json'))['swa']} | {same} | {last(new)} |")
print(f"\nmean {statistics.fmean(after):.1f} = {statistics.fmean(after) / 472.7:.3f}x the former default's 472.7; most {max(after):.1f}\n")

def pair(a, b):
    out = subprocess.run(['build/apps/bosch', 'paired', '--json', f'{a}-held-out-512.json', f'{b}-held-out-512.json'],
                         capture_output=True, text=True)
    if out.returncode != 0: raise SystemExit(out.stderr)
    d = json.loads(out.stdout)['all']['logprob']
    return d['mean'], f"{d['mean']:+.3f} [{d['ci'][0]:+.3f}, {d['ci'][1]:+.3f}]"

def pair_acc(a, b):
    out = subprocess.run(['build/apps/bosch', 'paired', '--json', f'{a}-held-out-512.json', f'{b}-held-out-512.json'],
                         capture_output=True, text=True)
    d = json.loads(out.stdout)['all']['accuracy']
    return f"{d['mean']:+.3f} [{d['ci'][0]:+.3f}, {d['ci'][1]:+.3f}]"

def over_draws(ds):
    m = statistics.fmean(ds)
    if len(ds) < 2: return f'{m:+.3f}'
    h = {2: 12.706, 3: 4.303, 4: 3.182, 5: 2.776, 6: 2.571}[len(ds)] * statistics.stdev(ds) / math.sqrt(len(ds))
    return f'{m:+.3f} [{m - h:+.3f}, {m + h:+.3f}]'

# The main job's draw on each kernel: avx512-bf16 (the published ones) and amx-bf16 (this follow-up).
MAIN = {'avx512-bf16': lambda t: main_stem('0.5', t), 'amx-bf16': lambda t: F / f'main-amx-0.5-task{t}'}
SETTINGS = [('former main-job-fast.cfg', 'avx512-bf16', lambda t: F / f'fast-0.5-task{t}', lambda t: H / f'half10-0.5-task{t}'),
            ('former main-job-fast.cfg', 'amx-bf16', lambda t: F / f'amx-0.5-task{t}', None),
            ('lambda2.cfg (new main-job-fast.cfg)', 'avx512-bf16', lambda t: F / f'lambda2-0.5-task{t}', None),
            ('lambda2.cfg (new main-job-fast.cfg)', 'amx-bf16', lambda t: F / f'lambda2-amx-0.5-task{t}', None),
            ('lambda1.cfg', 'amx-bf16', lambda t: F / f'lambda1-amx-0.5-task{t}', None),
            ('chunk8-race2.cfg', 'amx-bf16', lambda t: F / f'chunk8-race2-amx-0.5-task{t}', None),
            ('chunk6-race3.cfg', 'amx-bf16', lambda t: F / f'chunk6-race3-amx-0.5-task{t}', None)]
print('### rho 0.5: each setting against main-job.cfg on the same kernel and draw\n')
print('| settings | kernel | task seed | sample forwards | calibration | held-out log-prob 512 | acc 512 | minus main-job.cfg, paired: log-prob | accuracy | acc 1024 / all-full |')
print('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|')
pooled = {}
for name, kernel, stem_of, held_of in SETTINGS:
    for t in range(3):
        s = stem_of(t)
        h_stem = held_of(t) if held_of else s
        if not pathlib.Path(f'{s}.json').exists() or held(h_stem) is None: continue
        m, h = meta(s), held(h_stem)
        d, txt = pair(h_stem, MAIN[kernel](t))
        pooled.setdefault(name, []).append(d)
        p1024 = pathlib.Path(f'{h_stem}-held-out-1024.json')
        a1024 = f"{json.load(open(p1024))['held_out']['all']['accuracy'] / ALL_FULL_1024:.2f}" if p1024.exists() else ''
        print(f"| {name} | {kernel} | {t} | {m['forwards']:.1f} | {m['score']:.3f} | {h['mean_logprob']:.3f} | {h['accuracy']:.3f} | {txt} | {pair_acc(h_stem, MAIN[kernel](t))} | {a1024} |")
for name, kernel, stem_of, _ in SETTINGS:
    s = [stem_of(t) for t in range(3) if pathlib.Path(f'{stem_of(t)}.json').exists()]
    print(f"| {name} | {kernel} | mean | {statistics.fmean(meta(x)['forwards'] for x in s):.1f} (most {max(meta(x)['forwards'] for x in s):.1f}) | | | | | | |")
print('\nminus main-job.cfg over all draws of a setting (t 95%):\n')
for name, ds in pooled.items():
    print(f'- {name}: {len(ds)} draws, {over_draws(ds)}')
FORMER = R / 'search-cost/old-0.5'  # the former default (1 sample per task, fp32, budgets 32), task seed 0
print(f"\nminus the former default ({FORMER}, one draw), over the draws (t 95%):\n")
for name, stems in (('main-job.cfg', [MAIN[k](t) for k in MAIN for t in range(3)]),
                    ('former main-job-fast.cfg', [H / f'half10-0.5-task{t}' for t in range(3)] + [F / f'amx-0.5-task{t}' for t in range(3)]),
                    ('lambda2.cfg (new main-job-fast.cfg)', [F / f'lambda2{k}-0.5-task{t}' for k in ('', '-amx') for t in range(3)])):
    ds = [pair(x, FORMER)[0] for x in stems]
    print(f"- {name}: {len(ds)} draws, {over_draws(ds)}; per draw " + ', '.join(f'{d:+.3f}' for d in ds))
print()
for kernel, main_of in MAIN.items():
    print(f"main-job.cfg, {kernel}: " + ', '.join(f"{meta(main_of(t))['forwards']:.1f}" for t in range(3)) + ' sample forwards')

print('\n### Where rho 0.75 loses: Stage 2\'s plans held out (task seeds 1, 2)\n')
print('| task seed | plan | held-out log-prob 512 | minus the main job\'s plan, paired | its search\'s final mask minus the plan |')
print('|---:|---|---:|---:|---:|')
for t in (1, 2):
    base = P / f'task{t}-planmain'
    for x, final in (('planmain', H / f'main-0.75-task{t}'), ('planhalf', H / f'half-0.75-task{t}'),
                     ('mainheads-halfcompl', None), ('halfheads-maincompl', None)):
        s = P / f'task{t}-{x}'
        print(f"| {t} | {x} | {held(s)['mean_logprob']:.3f} | {'' if x == 'planmain' else paired(s, base)} | "
              f"{paired(final, s) if final else ''} |")

print('\n### Cheaper settings tried at rho 0.75 (task seed 1, one draw each)\n')
print('| settings | precision | sample forwards | evaluations (+ partial) | calibration | held-out log-prob 512 | acc 512 | minus main job, paired | minus main job on the same kernel, paired |')
print('|---|---|---:|---:|---:|---:|---:|---:|---:|')
for name, s in [('main job (main-job.cfg)', H / 'main-0.75-task1'), ('half.cfg', H / 'half-0.75-task1')] + \
        [(f'cut{x}.cfg', F / f'cut{x}-0.75-task1') for x in 'ABCDG'] + [('main-job.cfg', F / 'main-amx-0.75-task1'), ('lambda2.cfg', F / 'lambda2-amx-0.75-task1')]:
    m, h = meta(s), held(s)
    vs = paired(s, H / 'main-0.75-task1') if h and s != H / 'main-0.75-task1' else ''
    same = F / 'main-amx-0.75-task1' if 'amx' in m['precision'] else H / 'main-0.75-task1'
    vs2 = pair(s, same)[1] if h and s != same else ''
    hs = f"{h['mean_logprob']:.3f} | {h['accuracy']:.3f} | {vs} | {vs2}" if h else ' | | | '
    print(f"| {name} | {m['precision']} | {m['forwards']:.1f} | {m['evaluations']} (+{m['eliminated']}) | {m['score']:.3f} | {hs} |")

print('\n### rho 0.75 on the AMX kernel (task seeds 1, 2)\n')
print('| settings | task seed | sample forwards | calibration | held-out log-prob 512 | acc 512 | minus main-job.cfg (amx), paired |')
print('|---|---:|---:|---:|---:|---:|---:|')
for t in (1, 2):
    base = F / f'main-amx-0.75-task{t}'
    for name, s in (('main-job.cfg', base), ('lambda2.cfg', F / f'lambda2-amx-0.75-task{t}')):
        m, h = meta(s), held(s)
        print(f"| {name} | {t} | {m['forwards']:.1f} | {m['score']:.3f} | {h['mean_logprob']:.3f} | {h['accuracy']:.3f} | "
              f"{'' if s == base else pair(s, base)[1]} |")
