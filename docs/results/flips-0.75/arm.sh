#!/usr/bin/env bash
# One calibration draw of an arm of issue 51's rho 0.75 measurements on
# SmolLM2: the main job above rho 0.5 (scripts/main-job.cfg, 16 samples) at
# task seed SEED with the given select options, then held out as this folder
# (16 samples per task, task seed 11, fp32, 1024 then 512 tokens), whose
# `base` arm is the same search without them on the same machine. Outputs go
# to DIR as TAG-taskSEED.json / .jsonl / -held-out-LEN.json, commands to
# DIR/commands.txt. Resumable: finished outputs are skipped, a killed search
# resumes from its checkpoint.
# Usage: arm.sh DIR TAG BOSCH MODEL SEED [select options...]
set -euo pipefail
dir="$1"; tag="$2"; bin="$3"; model="$4"; s="$5"; shift 5
cfg="$(cd "$(dirname "$0")/../../../scripts" && pwd)/main-job.cfg"
cd "$dir"
out="$tag-task$s.json"
ck=(); [ -e "$out.checkpoint" ] && ck=(--resume)
if [ ! -f "$out" ]; then
  start=$(date +%s.%N)
  "$bin" select --config "$cfg" -m "$model" --ratio 0.75 --samples 4 --task-seed "$s" \
    --threads 1 --report=false "$@" --log "$tag-task$s.jsonl" -o "$out" --quiet "${ck[@]}"
  echo "\$ bosch select --config scripts/main-job.cfg -m MODEL --ratio 0.75 --samples 4 --task-seed $s --threads 1 --report=false $* --log $tag-task$s.jsonl -o $out --quiet  # $(echo "$(date +%s.%N) - $start" | bc) s beside other work" >> commands.txt
fi
for len in 1024 512; do
  o="$tag-task$s-held-out-$len.json"
  [ -f "$o" ] && continue
  "$bin" evaluate "$model" --mask "$out" --context $len --held-out-samples 16 --task-seed 11 --threads 1 --json --quiet > "$o.tmp" && mv "$o.tmp" "$o"
  echo "\$ bosch evaluate MODEL --mask $out --context $len --held-out-samples 16 --task-seed 11 --threads 1 --json --quiet > $o" >> commands.txt
done
