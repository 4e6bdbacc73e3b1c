#!/usr/bin/env bash
# Issue 51 step 2, remedy A: the main job with Stage 1 unscreened (--probe-samples 0) at
# rho 0.75 on SmolLM2 over calibration draws (task seeds 0-3), each mask
# scored held-out on 16 samples per task at 512 and 1024 tokens with a task
# seed no draw calibrated on (11). Resumable: a finished output is skipped.
# Usage: run.sh BOSCH_BINARY MODEL   (one thread, so it can run beside work)
set -euo pipefail
bin="$1"; model="$2"
here="$(cd "$(dirname "$0")" && pwd)"; cfg="$here/../../../scripts/main-job.cfg"
cd "$here"
log() { echo "\$ $*" >> commands.txt; }
for seed in 0 1 2 3; do
  out="draw-task$seed.json"
  if [ ! -s "$out" ]; then
    start=$(date +%s.%N)
    "$bin" select --config "$cfg" -m "$model" --ratio 0.75 --probe-samples 0 --task-seed "$seed" --threads 1 --report=false \
      --log "draw-task$seed.jsonl" -o "$out" --quiet --fresh
    log "bosch select --config scripts/main-job.cfg -m SmolLM2-135M-Instruct.Q4_1.gguf --ratio 0.75 --probe-samples 0 --task-seed $seed --threads 1 --report=false --log draw-task$seed.jsonl -o $out --quiet --fresh  # $(echo "$(date +%s.%N) - $start" | bc) s beside other work"
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
echo done > "$here/.finished"
