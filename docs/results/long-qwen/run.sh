#!/usr/bin/env bash
# Issue 50 item 3 on Qwen2.5-Coder-0.5B-Instruct (trained to 32768 tokens):
# masks for a 32768-token deployment with window 1024, chosen on a CPU, held
# out at 32768, 16384 and 8192 tokens against all-full and the static
# rankings RETRIEVAL, PROXY, FISHER on the same calibration samples.
#
# Masks (task seed 0, window 1024, sinks 0):
#   bosch-4k-R:  the main job (scripts/select-heads' config for R) calibrated
#                at 2048 and 4096 tokens (2 samples per task and length at
#                0.5, 4 at 0.75): the issue's target cell, 32768 being 8x its
#                longest sample;
#   bosch-0.5:   the main job with --deploy-context 32768, the recipe as it
#                was first written (4096 and 8192 tokens: 4x), chosen first;
#   proxy-R, retrieval-R, fisher-R: `bosch baseline --ratios 0.5,0.75` (one
#                ranking per method) on the samples of bosch-4k-0.5 (2 per
#                task and length), bf16 forwards as the searches';
#   all-full:    no SWA head (all-full.json, made from bosch-0.5.json).
# Held out (fp32, task seed 11): 4 samples per task (16) at 32768 tokens,
# 6 (24) at 16384, 8 (32) at 8192; every evaluation checkpoints per sample.
# Order: the searches, the rankings, then every mask at 32768 (the targets'
# cells first: all-full, the 8x BOSCH masks, the rankings at 0.75), then
# 16384, then 8192. Resumable: finished outputs are skipped, a killed search
# resumes from its checkpoint, a killed evaluation from its last sample.
#
# Usage: [THREADS=N] run.sh BOSCH_BINARY MODEL [DIR]   (default 1 thread)
set -euo pipefail
bin="$1"; model="$2"
here="$(cd "$(dirname "$0")" && pwd)"; scripts="$here/../../../scripts"
dir="${3:-$here}"; cd "$dir"
threads="${THREADS:-1}"
resume() { [ -e "$1.checkpoint" ] && echo --resume || true; }
timed() {  # timed OUT CMD...: runs CMD unless OUT exists, logs the time
  local out="$1"; shift
  [ -s "$out" ] && return 0
  local t0; t0=$(date +%s.%N)
  "$@"
  echo "\$ ${*/#$bin/bosch}  # $(echo "$(date +%s.%N) - $t0" | bc) s" >> commands.txt
}
base=(--window 1024 --sinks 0 --task-seed 0 --threads "$threads")
short=(--context 2048,4096 "${base[@]}")
for r in 0.5 0.75; do
  cfg=$(cd "$scripts/.." && scripts/main-job-config --ratio "$r" | sed 's/^--config //')
  timed "bosch-4k-$r.json" "$bin" select --config "$scripts/../$cfg" -m "$model" --ratio "$r" "${short[@]}" \
    --report=false --log "bosch-4k-$r.jsonl" -o "bosch-4k-$r.json" --quiet $(resume "bosch-4k-$r.json")
done
[ -s bosch-0.5.json ] || timed bosch-0.5.json "$bin" select --config "$scripts/main-job-fast.cfg" -m "$model" \
  --ratio 0.5 --deploy-context 32768 "${base[@]}" --report=false --log bosch-0.5.jsonl -o bosch-0.5.json --quiet \
  $(resume bosch-0.5.json)
[ -s all-full.json ] || { python3 -c "
import json
m = json.load(open('bosch-0.5.json'))
m['swa'] = [[] for _ in m['swa']]  # no SWA head; the tasks and windows of the recipe's metadata
m['metadata'] = {k: v for k, v in m['metadata'].items() if k not in ('ratio', 'score', 'held_out')}
json.dump(m, open('all-full.json.tmp', 'w'), indent=1)" && mv all-full.json.tmp all-full.json; }
for m in RETRIEVAL PROXY FISHER; do
  lower=$(echo "$m" | tr A-Z a-z)
  timed "$lower-0.75.json" "$bin" baseline -m "$model" --method "$m" --ratios 0.5,0.75 --samples 2 "${short[@]}" \
    --precision automatic -o "$lower.json" --scores "$lower-scores.json" --quiet
done
masks=(all-full bosch-4k-0.5 bosch-4k-0.75 proxy-0.75 retrieval-0.75 fisher-0.75 bosch-0.5 proxy-0.5 retrieval-0.5
       fisher-0.5)
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
