#!/usr/bin/env bash
# Calibrates θ for every system with measurements: the bundled platforms (GPU: V100, NPU: Ascend 910B3) and the
# GPU systems of the published set in data/public (A100, H100; B200, which has
# only two dense runs, starts from and is held near the H100 θ: same software stack, same NCCL/NVLink generation).
#   bash jobs/calibrate.sh [OUT_DIR=results] [DATASET=data/lmsimbench] [PUBLISHED=data/public]
# `bash jobs/calibrate.sh data/params` regenerates the parameter files shipped with lmsim (each system preset's
# `calibrated_params`). Every θ's report carries leave-one-model-out figures: predicting a model θ never saw is
# what users do, and `predict` / `search` quote that error when they do it.
set -euo pipefail
source "$(dirname "$0")/env.sh"
cd "$lmsim_root"  # provenance records paths relative to the project
out=${1:-results}
dataset=${2:-data/lmsimbench}
published=${3:-data/public}
mkdir -p "$out"
info=$("$lmsim_bin" --log-level warn dataset info "$dataset" --json)
for platform in gpu npu; do
  # Leave-one-model-out needs two models on the platform; a one-model dataset gets leave-one-configuration-out,
  # a platform without collections is skipped.
  models=$(printf '%s' "$info" | python3 -c "import json, sys
print(len({c['model_setting'] for c in json.load(sys.stdin)['collections'] if c['platform'] == sys.argv[1]}))" "$platform")
  if [ "$models" = 0 ]; then
    echo "calibrate.sh: $dataset has no $platform collection; $platform not calibrated"
    continue
  fi
  cv=leave-one-model-out
  [ "$models" -ge 2 ] || cv=loo
  "$lmsim_bin" --log-level warn calibrate --dataset "$dataset" --platform "$platform" --cv "$cv" \
    --out "$out/params_$platform.json" --report "$out/calibration_$platform.h5"
done
for system in a100_sxm_80g h100_sxm_80g; do
  "$lmsim_bin" --log-level warn calibrate --published "$published" --system "$system" --cv leave-one-model-out \
    --out "$out/params_$system.json" --report "$out/calibration_$system.h5"
done
"$lmsim_bin" --log-level warn calibrate --published "$published" --system b200_sxm_180g \
  --start "$out/params_h100_sxm_80g.json" --cv leave-one-model-out \
  --out "$out/params_b200_sxm_180g.json" --report "$out/calibration_b200_sxm_180g.h5"
