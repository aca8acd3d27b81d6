#!/usr/bin/env bash
# The main job on the bundled data: calibrate both platforms (and the GPU systems of the published set) -> MPI
# search over both Qwen3 strategy spaces on both platforms (fitted θ) -> evaluate (the bundled collections, and
# the published runs apart from those θ was fitted on) -> shortlist -> results/*.h5, results/*.png and a summary.
#   bash jobs/pipeline.sh            (after jobs/deps.sh and a Release build; `bash jobs/main.sh` does all three)
set -euo pipefail
source "$(dirname "$0")/env.sh"
res=$lmsim_root/results
mkdir -p "$res"
echo "== 1/5 calibrate (both platforms, leave-one-model-out CV)"
bash "$lmsim_root/jobs/calibrate.sh" "$res" >"$res/calibration.log"
grep -E "^(in-sample|cv )" "$res/calibration.log" | sed 's/^/   /'
echo "== 2/5 MPI search (2 ranks) over the Qwen3 strategy spaces on 8 devices"
for model in Qwen3-0.6B Qwen3-1.7B; do
  for platform in gpu npu; do
    system=$([ $platform = gpu ] && echo v100_sxm2_32g || echo ascend_910b3_64g)
    tag=$(echo "$model" | tr 'A-Z.' 'a-z_')
    bash "$lmsim_root/jobs/sweep.sh" "$res/search_${tag}_$platform.h5" --model "$model" --system "$system" \
      --stack "$platform" --params "$res/params_$platform.json" --devices 8 --seq 4096 --global-batch 32 --top 10 --memory-margin 1 \
      --quiet --json >"$res/search_${tag}_$platform.json" 2>"$res/search_${tag}_$platform.log"
  done
done
echo "== 3/5 evaluate"
"$lmsim_bin" --log-level warn evaluate --params "$res/params_gpu.json,$res/params_npu.json" --out "$res/evaluation.h5" \
  --json >"$res/evaluation.json"
# The GPU systems' θ on the published runs: the runs each was fitted on apart from the validation rows.
"$lmsim_bin" --log-level error evaluate --published "$lmsim_root/data/public" \
  --params "$res/params_a100_sxm_80g.json,$res/params_h100_sxm_80g.json,$res/params_b200_sxm_180g.json" \
  --out "$res/evaluation_published.h5" --json >"$res/evaluation_published.json"
echo "== 4/5 shortlist (NPU -> GPU, k = 3)"
bash "$lmsim_root/jobs/shortlist.sh" "$res" >"$res/shortlist.txt"
echo "== 5/5 plots"
"$lmsim_bin" plot "$res" || echo "   (plots skipped: python3-h5py / python3-matplotlib missing)"
/usr/bin/python3 "$lmsim_root/jobs/summary.py" "$res"
