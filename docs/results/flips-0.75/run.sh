#!/usr/bin/env bash
# Issue 51: the main job above rho 0.5 with the refinement's flip sweep
# (--refine-flips) on the four 16-sample calibration draws of
# ../samples16-0.75 (task seeds 0-3), worst draw (3) first; then held out as
# there (16 per task, task seed 11, fp32, 512 and 1024 tokens).
# TAG names the outputs (default flips), SAMPLES the calibration samples per task (default 4).
# Usage: [TAG=t] [SAMPLES=n] run.sh BOSCH MODEL [extra select options...]   (resumable: finished outputs are skipped)
set -euo pipefail
bin="$1"; model="$2"; shift 2
here="$(cd "$(dirname "$0")" && pwd)"; cd "$here"
tag="${TAG:-flips}"
for s in 3 0 1 2; do
  out="$tag-task$s.json"
  if [ ! -f "$out" ]; then
    start=$(date +%s.%N)
    "$bin" select --config ../../../scripts/main-job.cfg -m "$model" --ratio 0.75 --samples "${SAMPLES:-4}" --task-seed $s \
      --threads 1 --report=false --refine-flips "$@" --log "$tag-task$s.jsonl" -o "$out" --quiet
    echo "\$ bosch select --config scripts/main-job.cfg -m MODEL --ratio 0.75 --samples "${SAMPLES:-4}" --task-seed $s --threads 1 --report=false --refine-flips $* --log $tag-task$s.jsonl -o $out --quiet  # $(echo "$(date +%s.%N) - $start" | bc) s beside other work" >> commands.txt
  fi
done
./held-out.sh "$bin" "$model" "$tag-task3" "$tag-task0" "$tag-task1" "$tag-task2"
