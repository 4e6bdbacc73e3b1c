#!/usr/bin/env bash
# Issue 50 item 3 on Qwen2.5-Coder-0.5B-Instruct (trained to 32768 tokens):
# masks for a 32768-token deployment with window 1024, chosen on a CPU by the
# recipe of `--deploy-context 32768` (calibration at 4096 and 8192 tokens),
# held out at 32768, 16384 and 8192 tokens against all-full and the static
# rankings RETRIEVAL, PROXY, FISHER on the same calibration samples.
#
# Masks (task seed 0, window 1024, sinks 0):
#   bosch-R:     the main job (scripts/select-heads' config for R) with
#                --deploy-context 32768 --window 1024;
#   proxy-R, retrieval-R, fisher-R: `bosch baseline` with the same
#                --deploy-context (the same calibration samples, 2 per task
#                and length);
#   all-full:    no SWA head (all-full.json, made from bosch-0.5.json).
# Held out (fp32, task seed 11): 4 samples per task (16) at 32768 tokens,
# 6 (24) at 16384, 8 (32) at 8192; every evaluation checkpoints per sample.
# Order: the searches, then every mask at 32768 (the targets' cells first:
# all-full, BOSCH, the rankings at 0.75, then at 0.5), then 16384, then 8192.
# Resumable: finished outputs are skipped, a killed search resumes from its
# checkpoint, a killed evaluation from its last sample.
#
# Usage: [THREADS=N] run.sh BOSCH_BINARY MODEL [DIR]   (default 1 thread)
set -euo pipefail
bin="$1"; model="$2"
here="$(cd "$(dirname "$0")" && pwd)"; scripts="$here/../../../scripts"
dir="${3:-$here}"; cd "$dir"
threads="${THREADS:-1}"
common=(--deploy-context 32768 --window 1024 --sinks 0 --task-seed 0 --threads "$threads")
resume() { [ -e "$1.checkpoint" ] && echo --resume || true; }
timed() {  # timed OUT CMD...: runs CMD unless OUT exists, logs the time
  local out="$1"; shift
  [ -s "$out" ] && return 0
  local t0; t0=$(date +%s.%N)
  "$@"
  echo "\$ ${*/#$bin/bosch}  # $(echo "$(date +%s.%N) - $t0" | bc) s" >> commands.txt
}
for r in 0.5 0.75; do
  cfg=$(cd "$scripts/.." && scripts/main-job-config --ratio "$r" | sed 's/^--config //')
  timed "bosch-$r.json" "$bin" select --config "$scripts/../$cfg" -m "$model" --ratio "$r" "${common[@]}" \
    --report=false --log "bosch-$r.jsonl" -o "bosch-$r.json" --quiet $(resume "bosch-$r.json")
  [ -s all-full.json ] || python3 -c "
import json
m = json.load(open('bosch-0.5.json'))
m['swa'] = [[] for _ in m['swa']]  # no SWA head; the tasks and windows of the recipe's metadata
m['metadata'] = {k: v for k, v in m['metadata'].items() if k not in ('ratio', 'score', 'held_out')}
json.dump(m, open('all-full.json.tmp', 'w'), indent=1)" && mv all-full.json.tmp all-full.json
done
for r in 0.75 0.5; do
  for m in RETRIEVAL PROXY FISHER; do
    lower=$(echo "$m" | tr A-Z a-z)
    timed "$lower-$r.json" "$bin" baseline -m "$model" --method "$m" --ratio "$r" --samples 2 "${common[@]}" \
      -o "$lower-$r.json" --quiet
  done
done
masks=(all-full bosch-0.5 bosch-0.75 proxy-0.75 retrieval-0.75 fisher-0.75 proxy-0.5 retrieval-0.5 fisher-0.5)
for ctx in 32768 16384 8192; do
  case "$ctx" in 32768) n=4 ;; 16384) n=6 ;; *) n=8 ;; esac
  for m in "${masks[@]}"; do
    out="$m-held-out-$ctx.json"
    [ -s "$out" ] && continue
    t0=$(date +%s.%N)
    "$bin" evaluate "$model" --mask "$m.json" --context "$ctx" --held-out-samples "$n" --task-seed 11 \
      --threads "$threads" --checkpoint "$out.checkpoint" --json --quiet > "$out.tmp"
    mv "$out.tmp" "$out"; rm -f "$out.checkpoint"
    echo "\$ bosch evaluate MODEL --mask $m.json --context $ctx --held-out-samples $n --task-seed 11 --threads $threads --json  # $(echo "$(date +%s.%N) - $t0" | bc) s" >> commands.txt
  done
done
echo done > .finished
