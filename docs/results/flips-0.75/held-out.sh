#!/usr/bin/env bash
# Held out as ../samples16-0.75 (16 samples per task, task seed 11, fp32) for
# the given masks of this folder, 1024 tokens first; finished reports are skipped.
# Usage: held-out.sh BOSCH MODEL NAME...   (NAME.json -> NAME-held-out-LEN.json)
set -euo pipefail
bin="$1"; model="$2"; shift 2
cd "$(dirname "$0")"
for len in 1024 512; do
  for name in "$@"; do
    out="$name-held-out-$len.json"
    [ -f "$out" ] && continue
    "$bin" evaluate "$model" --mask "$name.json" --context $len --held-out-samples 16 --task-seed 11 --threads 1 --json --quiet > "$out.tmp" && mv "$out.tmp" "$out"
    echo "\$ bosch evaluate MODEL --mask $name.json --context $len --held-out-samples 16 --task-seed 11 --threads 1 --json --quiet > $out" >> commands.txt
  done
done
