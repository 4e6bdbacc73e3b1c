#!/usr/bin/env bash
# Scores masks on the calibration samples of a draw (task seed), without a
# search: `bosch select --init` scores the given masks right after the anchors
# (stage "seeds"), and --max-evaluations 6 stops it there. The log's seed
# scores are the masks' values of that draw's own objective.
# Usage: cross.sh BOSCH MODEL SAMPLES_PER_TASK TASK_SEED MASK...   (prints one line per mask)
set -euo pipefail
bin="$1"; model="$2"; samples="$3"; seed="$4"; shift 4
here="$(cd "$(dirname "$0")" && pwd)"; tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$bin" select --config "$here/../draws-0.75/main-job-8.cfg" -m "$model" --ratio 0.75 --samples "$samples" \
  --task-seed "$seed" --threads 1 --report=false --race=false --init "$@" --max-evaluations $(( $# + 3 )) \
  --log "$tmp/log.jsonl" -o "$tmp/out.json" --quiet --fresh
python3 - "$tmp/log.jsonl" "$@" <<'P'
import json, sys
def bits(f):
    d = json.load(open(f)); kv = d['layout']['num_kv_heads']
    s = ['0'] * len(d['swa']) * kv
    for l, hs in enumerate(d['swa']):
        for h in hs: s[kv * l + h] = '1'
    return ''.join(s)
log = [json.loads(l) for l in open(sys.argv[1])]
for f in sys.argv[2:]:
    b = bits(f)
    score = next((r['score'] for r in log if r['stage'] == 'seeds' and r['mask'] == b), None)
    print(f"{f}\t{score:.4f}" if score is not None else f"{f}\tnot scored")
P
