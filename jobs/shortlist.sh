#!/usr/bin/env bash
# NPU-guided GPU shortlist and the cross-platform report for every model setting measured on both.
#   bash jobs/shortlist.sh [OUT_DIR=results] [DATASET=data/lmsimbench] [K=3]
set -euo pipefail
source "$(dirname "$0")/env.sh"
out=${1:-$lmsim_root/results}
dataset=${2:-$lmsim_root/data/lmsimbench}
k=${3:-3}
mkdir -p "$out"
"$lmsim_bin" --log-level warn shortlist --dataset "$dataset" --from npu --to gpu --k "$k" --out "$out/shortlist.h5" \
  --json >"$out/shortlist.json"
"$lmsim_bin" --log-level warn shortlist --dataset "$dataset" --from npu --to gpu --k "$k"
