#!/usr/bin/env bash
# Issue 51: two climbs in the refinement (--refine-both: as today, then with
# the flip sweep; the better end by calibration score), one draw of the main
# job at rho 0.75 on SmolLM2, held out as ../flips-0.75 (../flips-0.75/arm.sh),
# whose `base` and `flips` arms are the two climbs run apart.
# Usage: draw.sh BOSCH MODEL SEED [TAG [extra select options...]]   (resumable)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="$1"; model="$2"; s="$3"; tag="${4:-both}"; shift 3; [ $# -gt 0 ] && shift
exec "$here/../flips-0.75/arm.sh" "$here" "$tag" "$bin" "$model" "$s" --refine-both "$@"
