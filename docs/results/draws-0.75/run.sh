#!/usr/bin/env bash
# Issue 51: the spread of the main job (main-job-8.cfg: scripts/main-job.cfg as it was, 8 samples) on SmolLM2 over
# calibration draws (task seeds 0-3), each mask scored held-out on 16 samples
# per task at 512 and 1024 tokens with a task seed no draw calibrated on (11).
# Resumable: a finished output is skipped.
# Usage: [SEEDS="3 0 1 2"] run.sh BOSCH_BINARY MODEL [DIR RATIO [SELECT-ARGS...]]
#   (one thread, so it can run beside work). Defaults: this folder, 0.75.
#   The remedies: run.sh BIN MODEL ../probe-all-0.75 0.75 --probe-samples 0
#                 run.sh BIN MODEL ../confirm-0.75 0.75 --confirm-probes
#                 run.sh BIN MODEL ../samples16-0.75 0.75 --samples 4
#                 run.sh BIN MODEL ../draws-0.875 0.875
set -euo pipefail
bin="$1"; model="$2"
here="$(cd "$(dirname "$0")" && pwd)"; cfg="$here/main-job-8.cfg"  # the 8-sample main job these runs compare
dir="${3:-$here}"; ratio="${4:-0.75}"; extra=("${@:5}")
cd "$dir"
log() { echo "\$ $*" >> commands.txt; }
for seed in ${SEEDS:-0 1 2 3}; do
  out="draw-task$seed.json"
  if [ ! -s "$out" ]; then
    start=$(date +%s.%N)
    "$bin" select --config "$cfg" -m "$model" --ratio "$ratio" "${extra[@]}" --task-seed "$seed" --threads 1 --report=false \
      --log "draw-task$seed.jsonl" -o "$out" --quiet --fresh
    log "bosch select --config docs/results/draws-0.75/main-job-8.cfg -m SmolLM2-135M-Instruct.Q4_1.gguf --ratio $ratio ${extra[*]} --task-seed $seed --threads 1 --report=false --log draw-task$seed.jsonl -o $out --quiet --fresh  # $(echo "$(date +%s.%N) - $start" | bc) s beside other work"
  fi
  for ctx in 512 1024; do
    held="draw-task$seed-held-out-$ctx.json"
    refs=(); [ "$seed" = 0 ] && refs=(--references)
    if [ ! -s "$held" ]; then
      "$bin" evaluate "$model" --mask "$out" --context "$ctx" --held-out-samples 16 --task-seed 11 --threads 1 \
        "${refs[@]}" --json --quiet > "$held.tmp" && mv "$held.tmp" "$held"
      log "bosch evaluate SmolLM2-135M-Instruct.Q4_1.gguf --mask $out --context $ctx --held-out-samples 16 --task-seed 11 --threads 1 ${refs[*]} --json --quiet > $held"
    fi
  done
done
echo done > "$dir/.finished"
