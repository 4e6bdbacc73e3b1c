#!/usr/bin/env bash
# Issue 51: jackknife plans (--plan-candidates 4), one draw of the main job at
# rho 0.75 on SmolLM2, held out as ../flips-0.75 (../flips-0.75/arm.sh).
# Usage: draw.sh BOSCH MODEL SEED [TAG [extra select options...]]   (resumable)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="$1"; model="$2"; s="$3"; tag="${4:-plans}"; shift 3; [ $# -gt 0 ] && shift
exec "$here/../flips-0.75/arm.sh" "$here" "$tag" "$bin" "$model" "$s" --plan-candidates 4 "$@"
