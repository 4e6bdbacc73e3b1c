#!/usr/bin/env bash
# One more draw of the 16-sample arms: TAG (flips: --refine-flips, base: without) at task seed SEED, then held out at 1024 and 512.
# Usage: draw.sh BOSCH MODEL TAG SEED
set -euo pipefail
bin="$1"; model="$2"; tag="$3"; s="$4"
cd "$(dirname "$0")"
extra=(); [ "$tag" = flips ] && extra=(--refine-flips)
out="$tag-task$s.json"
if [ ! -f "$out" ]; then
  start=$(date +%s.%N)
  "$bin" select --config ../../../scripts/main-job.cfg -m "$model" --ratio 0.75 --samples 4 --task-seed $s \
    --threads 1 --report=false "${extra[@]}" --log "$tag-task$s.jsonl" -o "$out" --quiet
  echo "\$ bosch select --config scripts/main-job.cfg -m MODEL --ratio 0.75 --samples 4 --task-seed $s --threads 1 --report=false ${extra[*]} --log $tag-task$s.jsonl -o $out --quiet  # $(echo "$(date +%s.%N) - $start" | bc) s beside other work" >> commands.txt
fi
./held-out.sh "$bin" "$model" "$tag-task$s"
