#!/usr/bin/env bash
# Would a final selection among the draws on more samples pick the good ones?
# Each draw's mask scored on a common selection set: 8 held-out samples per
# task at 512 tokens with task seed 21 (neither a calibration seed 0-3 nor the
# test seed 11). Resumable. Usage: select.sh BOSCH_BINARY MODEL
set -euo pipefail
bin="$1"; model="$2"; cd "$(dirname "$0")"
for seed in 0 1 2 3; do
  out="draw-task$seed-selection-512.json"
  [ -s "$out" ] && continue
  start=$(date +%s.%N)
  "$bin" evaluate "$model" --mask "draw-task$seed.json" --context 512 --held-out-samples 8 --task-seed 21 \
    --json --quiet > "$out.tmp" && mv "$out.tmp" "$out"
  echo "\$ bosch evaluate SmolLM2-135M-Instruct.Q4_1.gguf --mask draw-task$seed.json --context 512 --held-out-samples 8 --task-seed 21 --json --quiet > $out  # $(echo "$(date +%s.%N) - $start" | bc) s" >> commands.txt
done
