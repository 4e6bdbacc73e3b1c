#!/usr/bin/env bash
# Finishes the control draw's held-out scoring (its run.sh was stopped).
set -euo pipefail
cd "$(dirname "$0")"
while pgrep -f "bosch-restore evaluate .*draw-task3.json --context 512" > /dev/null; do sleep 5; done
[ -s draw-task3-held-out-512.json ] || mv draw-task3-held-out-512.json.tmp draw-task3-held-out-512.json
echo '$ bosch evaluate SmolLM2-135M-Instruct.Q4_1.gguf --mask draw-task3.json --context 512 --held-out-samples 16 --task-seed 11 --threads 1  --json --quiet > draw-task3-held-out-512.json' >> commands.txt
/work/bin/bosch-restore evaluate /root/.cache/bosch/models/SmolLM2-135M-Instruct.Q4_1.gguf --mask draw-task3.json --context 1024 --held-out-samples 16 --task-seed 11 --threads 1 --json --quiet > draw-task3-held-out-1024.json.tmp
mv draw-task3-held-out-1024.json.tmp draw-task3-held-out-1024.json
echo '$ bosch evaluate SmolLM2-135M-Instruct.Q4_1.gguf --mask draw-task3.json --context 1024 --held-out-samples 16 --task-seed 11 --threads 1  --json --quiet > draw-task3-held-out-1024.json' >> commands.txt
