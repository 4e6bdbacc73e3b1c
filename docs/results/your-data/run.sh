#!/usr/bin/env bash
# Issue 52, item 6: does a mask chosen on needles hold on your own data, and
# the other way round? SmolLM2-135M-Instruct, the main job's settings
# (scripts/main-job.cfg: rho 0.5, 512 tokens, window 64), one mask chosen on
# the built-in needle tasks and one on code completion over this repository's
# sources (scripts/make-code-tasks at a pinned revision); each scored held-out
# on both (task seed 11, which neither search calibrated on), with all-full
# and all-SWA, then paired (bosch paired). Resumable: a finished output is
# skipped. Usage: run.sh BOSCH_BINARY MODEL (one thread: it runs beside work).
set -euo pipefail
bin="$1"; model="$2"
here="$(cd "$(dirname "$0")" && pwd)"; cfg="$here/../../../scripts/main-job.cfg"
cd "$here"
log() { echo "\$ $*" >> commands.txt; }
rev=dda0fd6
if [ ! -s code.jsonl ]; then
  ../../../scripts/make-code-tasks --rev "$rev" -o code.jsonl
  log "scripts/make-code-tasks --rev $rev -o code.jsonl  # sha256 $(sha256sum code.jsonl | cut -c1-64)"
fi
declare -A tasks=([code]="file:code.jsonl" [needles]="niah_single_1,niah_single_2,niah_multikey_1,passkey")
declare -A held=([code]=64 [needles]=16)
for m in needles code; do
  out="$m-mask.json"
  if [ ! -s "$out" ]; then
    start=$(date +%s)
    "$bin" select --config "$cfg" -m "$model" --tasks "${tasks[$m]}" --threads 1 --report=false \
      --log "$m-mask.jsonl" -o "$out" --quiet --fresh
    log "bosch select --config scripts/main-job.cfg -m SmolLM2-135M-Instruct.Q4_1.gguf --tasks ${tasks[$m]} --threads 1 --report=false --log $m-mask.jsonl -o $out --quiet --fresh  # $(( $(date +%s) - start )) s beside other work"
  fi
done
for d in code needles; do
  for m in needles code; do
    rep="held-out-$d-$m.json"
    refs=(); [ "$m" = needles ] && refs=(--references)
    if [ ! -s "$rep" ]; then
      "$bin" evaluate "$model" --mask "$m-mask.json" --tasks "${tasks[$d]}" --context 512 \
        --held-out-samples "${held[$d]}" --task-seed 11 --threads 1 "${refs[@]}" --json --quiet > "$rep.tmp"
      mv "$rep.tmp" "$rep"
      log "bosch evaluate SmolLM2-135M-Instruct.Q4_1.gguf --mask $m-mask.json --tasks ${tasks[$d]} --context 512 --held-out-samples ${held[$d]} --task-seed 11 --threads 1 ${refs[*]} --json --quiet > $rep"
    fi
  done
  "$bin" paired "held-out-$d-code.json" "held-out-$d-needles.json" > "paired-$d.txt"
done
echo done > .finished
