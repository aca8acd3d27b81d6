#!/usr/bin/env bash
# Calibrates θ for both bundled platforms (GPU: V100, NPU: Ascend 910B3) with leave-one-out CV.
#   bash jobs/calibrate.sh [OUT_DIR=results] [DATASET=data/lmsimbench]
# `bash jobs/calibrate.sh data/params` regenerates the parameter files shipped with the bundled data.
set -euo pipefail
source "$(dirname "$0")/env.sh"
cd "$lmsim_root"  # provenance records paths relative to the project
out=${1:-results}
dataset=${2:-data/lmsimbench}
mkdir -p "$out"
for platform in gpu npu; do
  "$lmsim_bin" --log-level warn calibrate --dataset "$dataset" --platform "$platform" --cv loo \
    --out "$out/params_$platform.json" --report "$out/calibration_$platform.h5"
done
