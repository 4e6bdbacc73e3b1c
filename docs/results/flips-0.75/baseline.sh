#!/usr/bin/env bash
# The same searches without the flip sweep on this machine (the searches of
# ../samples16-0.75 and ../draws-0.75 ran on another CPU, whose bf16 kernel
# rounds otherwise and so takes another path): task seed 3, 16 samples (base)
# and 8 (base8), then held out as the others.
# Usage: baseline.sh BOSCH MODEL
set -euo pipefail
bin="$1"; model="$2"
cd "$(dirname "$0")"
for arm in base:4 base8:2; do
  tag=${arm%%:*}; n=${arm##*:}; out="$tag-task3.json"
  if [ ! -f "$out" ]; then
    start=$(date +%s.%N)
    "$bin" select --config ../../../scripts/main-job.cfg -m "$model" --ratio 0.75 --samples $n --task-seed 3 \
      --threads 1 --report=false --log "$tag-task3.jsonl" -o "$out" --quiet
    echo "\$ bosch select --config scripts/main-job.cfg -m MODEL --ratio 0.75 --samples $n --task-seed 3 --threads 1 --report=false --log $tag-task3.jsonl -o $out --quiet  # $(echo "$(date +%s.%N) - $start" | bc) s beside other work" >> commands.txt
  fi
done
./held-out.sh "$bin" "$model" base8-task3 base-task3
