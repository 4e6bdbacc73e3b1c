#!/usr/bin/env python3
# Stage 2's plan (Stage 3's start) of the main job and of the cheaper cut
# (half.cfg) at rho 0.75, task seeds 1 and 2, read off their logs, and the
# two hybrids: one plan's cascade (the head each layer keeps full) with the
# other's completion layers (the layers made entirely SWA). Writes the mask
# files here; run from the repository root.
import json, pathlib
H = pathlib.Path('docs/results/search-half')
L, K = 30, 3

def layers(bits):
    return [bits[i * K:(i + 1) * K] for i in range(L)]

def plan_of(log):
    rows = [json.loads(l) for l in open(log)]
    probes = [r for r in rows if r['stage'] == 'probes']
    completion = [layers(r['mask']) for r in probes[-L:]]  # lowest layer first
    assert all(completion[l][l] == '1' * K for l in range(L))
    # The final cascade: layer l as the next completion probe has it.
    cascade = [completion[(l + 1) % L][l] for l in range(L)]
    plan = layers(next(r for r in rows if r['stage'] == 'groups')['mask'])
    whole = [l for l in range(L) if plan[l] == '1' * K]
    assert all(plan[l] == ('1' * K if l in whole else cascade[l]) for l in range(L))
    return cascade, whole, plan

def write(name, per_layer):
    swa = [[k for k in range(K) if per_layer[l][k] == '1'] for l in range(L)]
    assert sum(map(len, swa)) == 68
    json.dump({'format': 'bosch.head_mask', 'version': 1,
               'layout': {'num_kv_heads': K, 'num_layers': L, 'num_query_heads': 9}, 'swa': swa},
              open(H / 'plans' / f'{name}.json', 'w'))

for t in ('task1', 'task2'):
    cm, wm, pm = plan_of(H / f'main-0.75-{t}.jsonl')
    ch, wh, ph = plan_of(H / f'half-0.75-{t}.jsonl')
    print(t, 'whole-SWA layers: main', wm, 'half', wh, '; cascades agree on', sum(a == b for a, b in zip(cm, ch)), 'layers')
    write(f'{t}-planmain', pm)
    write(f'{t}-planhalf', ph)
    write(f'{t}-mainheads-halfcompl', ['1' * K if l in wh else cm[l] for l in range(L)])
    write(f'{t}-halfheads-maincompl', ['1' * K if l in wm else ch[l] for l in range(L)])
