#!/usr/bin/env bash
# Issue 51: the main job above rho 0.5 (scripts/main-job.cfg, 16 samples) with
# two climbs in the refinement (--refine-both: as today, then with the flip
# sweep; the better end by calibration score) at rho 0.75 on SmolLM2, one
# calibration draw (task seed SEED), then held out as ../flips-0.75 (16
# samples per task, task seed 11, fp32, 1024 then 512 tokens), whose `base`
# and `flips` arms are the two climbs run apart on the same machine.
# Usage: draw.sh BOSCH MODEL SEED [TAG [extra select options...]]   (resumable: finished outputs are skipped)
set -euo pipefail
bin="$1"; model="$2"; s="$3"; tag="${4:-both}"; shift 3; [ $# -gt 0 ] && shift
here="$(cd "$(dirname "$0")" && pwd)"; cd "$here"
out="$tag-task$s.json"
ck=(); [ -e "$out.checkpoint" ] && ck=(--resume)
if [ ! -f "$out" ]; then
  start=$(date +%s.%N)
  "$bin" select --config ../../../scripts/main-job.cfg -m "$model" --ratio 0.75 --samples 4 --task-seed "$s" \
    --threads 1 --report=false --refine-both "$@" --log "$tag-task$s.jsonl" -o "$out" --quiet "${ck[@]}"
  echo "\$ bosch select --config scripts/main-job.cfg -m MODEL --ratio 0.75 --samples 4 --task-seed $s --threads 1 --report=false --refine-both $* --log $tag-task$s.jsonl -o $out --quiet  # $(echo "$(date +%s.%N) - $start" | bc) s beside other work" >> commands.txt
fi
for len in 1024 512; do
  o="$tag-task$s-held-out-$len.json"
  [ -f "$o" ] && continue
  "$bin" evaluate "$model" --mask "$out" --context $len --held-out-samples 16 --task-seed 11 --threads 1 --json --quiet > "$o.tmp" && mv "$o.tmp" "$o"
  echo "\$ bosch evaluate MODEL --mask $out --context $len --held-out-samples 16 --task-seed 11 --threads 1 --json --quiet > $o" >> commands.txt
done
