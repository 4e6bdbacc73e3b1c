#!/usr/bin/env bash
# Issue 50 item 3 on SmolLM2-135M-Instruct (trained to 8192 tokens): masks
# chosen on short samples with window 256, held out at 2048, 4096 and 8192
# tokens against all-full and the static rankings RETRIEVAL, PROXY, FISHER.
#
# Masks (rho 0.5 and 0.75, task seed 0, window 256, sinks 0):
#   bosch-single-R: the main job as it was (../draws-0.75/main-job-8.cfg) on 2 x 1024-token
#                   samples per task;
#   bosch-mixed-R:  1 sample per task at 512 and 1 at 1024 tokens;
#   retrieval-R, proxy-R, fisher-R: the rankings on the single search's
#                   calibration samples (2 x 1024 per task).
# Held out (fp32, task seed 11, no calibration seed): 16 samples per task at
# 2048 and 4096 tokens, 8 per task at 8192; every evaluation checkpoints per
# sample (bosch evaluate --checkpoint), so a killed run loses at most one
# sample. Resumable: finished outputs are skipped.
#
# Usage: [THREADS=N] run.sh BOSCH_BINARY MODEL [DIR]   (one thread unless THREADS; beside other work)
set -euo pipefail
bin="$1"; model="$2"
here="$(cd "$(dirname "$0")" && pwd)"; cfg="$here/../draws-0.75/main-job-8.cfg"  # the main job with 2 samples per task
dir="${3:-$here}"; cd "$dir"
threads="${THREADS:-1}"
common=(--window 256 --sinks 0 --task-seed 0 --threads "$threads")
resume() { [ -e "$1.checkpoint" ] && echo --resume || true; }  # a killed search continues
timed() {  # timed OUT CMD...: runs CMD unless OUT exists, logs the time
  local out="$1"; shift
  [ -s "$out" ] && return 0
  local t0; t0=$(date +%s.%N)
  "$@"
  echo "\$ ${*/#$bin/bosch}  # $(echo "$(date +%s.%N) - $t0" | bc) s" >> commands.txt
}
for r in 0.5 0.75; do
  timed "bosch-single-$r.json" "$bin" select --config "$cfg" -m "$model" --ratio "$r" --context 1024 "${common[@]}" \
    --report=false --log "bosch-single-$r.jsonl" -o "bosch-single-$r.json" --quiet $(resume "bosch-single-$r.json")
  timed "bosch-mixed-$r.json" "$bin" select --config "$cfg" -m "$model" --ratio "$r" --context 512,1024 --samples 1 \
    "${common[@]}" --report=false --log "bosch-mixed-$r.jsonl" -o "bosch-mixed-$r.json" --quiet $(resume "bosch-mixed-$r.json")
  for m in RETRIEVAL PROXY FISHER; do
    lower=$(echo "$m" | tr A-Z a-z)
    timed "$lower-$r.json" "$bin" baseline -m "$model" --method "$m" --ratio "$r" --context 1024 --samples 2 \
      "${common[@]}" -o "$lower-$r.json" --quiet
  done
done
# Held-out reports in the order that decides most first: the 8x cells
# (8192 tokens) of the BOSCH masks and the rho 0.75 rankings, then every mask
# at 2048 and 4096, then the rest at 8192. The all-full reference rides
# with bosch-mixed-0.5 (--references) at each length.
masks=(bosch-mixed-0.5 bosch-single-0.5 bosch-mixed-0.75 bosch-single-0.75 proxy-0.5 proxy-0.75
       retrieval-0.5 retrieval-0.75 fisher-0.5 fisher-0.75)
cells=(bosch-mixed-0.5@8192 bosch-mixed-0.75@8192 proxy-0.75@8192 retrieval-0.75@8192 bosch-single-0.5@8192
       bosch-single-0.75@8192)
for ctx in 2048 4096 8192; do for m in "${masks[@]}"; do cells+=("$m@$ctx"); done; done
for cell in "${cells[@]}"; do
  m="${cell%@*}"; ctx="${cell#*@}"
  n=16; [ "$ctx" = 8192 ] && n=8
  out="$m-held-out-$ctx.json"
  [ -s "$out" ] && continue
  refs=(); [ "$m" = bosch-mixed-0.5 ] && refs=(--references)
  t0=$(date +%s.%N)
  "$bin" evaluate "$model" --mask "$m.json" --context "$ctx" --held-out-samples "$n" --task-seed 11 --threads "$threads" \
    "${refs[@]}" --checkpoint "$out.checkpoint" --json --quiet > "$out.tmp"
  mv "$out.tmp" "$out"; rm -f "$out.checkpoint"
  echo "\$ bosch evaluate MODEL --mask $m.json --context $ctx --held-out-samples $n --task-seed 11 --threads $threads ${refs[*]} --json  # $(echo "$(date +%s.%N) - $t0" | bc) s" >> commands.txt
done
echo done > .finished
