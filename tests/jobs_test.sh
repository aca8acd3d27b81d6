#!/usr/bin/env bash
# The mpirun job scripts, run locally with 2 ranks; their HDF5 results are read back with h5dump.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
LMSIM_RANKS=2 bash "$root/jobs/sweep.sh" "$tmp/sweep.h5" --model Qwen3-1.7B --system ascend_910b3_64g --stack npu \
  --params "$root/data/params/params_npu.json" --devices 8 --top 5 --quiet >"$tmp/sweep.out" 2>&1 || { echo "FAIL: sweep.sh"; cat "$tmp/sweep.out"; fail=1; }
h5dump -A -g /provenance "$tmp/sweep.h5" | grep -q '"ranks"\|ranks' || { echo "FAIL: sweep provenance"; fail=1; }
[ "$(h5dump -a /provenance/ranks "$tmp/sweep.h5" | grep -o '(0): [0-9]*' | grep -o '[0-9]*$')" = 2 ] || { echo "FAIL: sweep did not run on 2 ranks"; fail=1; }
bash "$root/jobs/calibrate.sh" "$tmp/cal" >"$tmp/cal.out" 2>&1 || { echo "FAIL: calibrate.sh"; tail "$tmp/cal.out"; fail=1; }
for p in gpu npu; do
  [ -s "$tmp/cal/params_$p.json" ] || { echo "FAIL: params_$p.json missing"; fail=1; }
  h5dump -d /in_sample/optimization_config "$tmp/cal/calibration_$p.h5" >/dev/null || { echo "FAIL: calibration_$p.h5"; fail=1; }
done
# Every θ carries leave-one-model-out figures; a dataset with one model per platform gets leave-one-configuration-out.
grep -q '"kind": "leave-one-model-out"' "$tmp/cal/params_npu.json" || { echo "FAIL: bundled θ not leave-one-model-out"; fail=1; }
mkdir -p "$tmp/one"
cp -r "$root/data/lmsimbench/qwen3_0.6b_4k" "$tmp/one/"
printf 'model_setting,platform,directory,system,model,seq_length,devices\nqwen3_0.6b_4k,npu,qwen3_0.6b_4k,ascend_910b3_64g,,4096,8\n' \
  >"$tmp/one/data_manifest.csv"
bash "$root/jobs/calibrate.sh" "$tmp/cal1" "$tmp/one" >"$tmp/cal1.out" 2>&1 && \
  grep -q '"kind": "loo"' "$tmp/cal1/params_npu.json" || { echo "FAIL: one-model calibrate.sh"; tail "$tmp/cal1.out"; fail=1; }
bash "$root/jobs/shortlist.sh" "$tmp/sl" >"$tmp/sl.out" 2>&1 || { echo "FAIL: shortlist.sh"; fail=1; }
grep -q "0.718" "$tmp/sl.out" || { echo "FAIL: shortlist report"; fail=1; }
h5dump -d /qwen3_0.6b_4k/shortlist/optimization_config "$tmp/sl/shortlist.h5" >/dev/null || { echo "FAIL: shortlist.h5"; fail=1; }
# The main job's summary: a #1 that fits with P(fits) < 0.9 is said with the first listed that fits surely.
mkdir -p "$tmp/res"
cp "$root/data/params/params_gpu.json" "$root/data/params/params_npu.json" "$tmp/res/"
/usr/bin/python3 - "$tmp/res" <<'PY'
import json, sys
rank = lambda n, t, p: {"config_name": n, "iteration_time_s": t, "iteration_time_s_p90": t, "p_fits": p,
                        "max_peak_memory_bytes": 2**35}
search = {"model": "M", "space_size": 3, "feasible": 3, "wall_s": 0.1, "ranks": 2,
          "ranking": [rank("a", 1.0, 0.5), rank("b", 1.05, 0.8), rank("c", 1.1, 0.95)]}
json.dump(search, open(sys.argv[1] + "/search_m_npu.json", "w"))
json.dump({"m": {"candidates": 3, "k": 1, "target_optimum": "a", "rules": [{"shortlist": ["a"],
          "contains_target_optimum": True, "top1_regret_pct": 0, "topk_regret_pct": 0}],
          "cross_platform": {"strata": [{"time_spearman": 1, "time_kendall_tau_b": 1}]}}},
          open(sys.argv[1] + "/shortlist.json", "w"))
PY
/usr/bin/python3 "$root/jobs/summary.py" "$tmp/res" >"$tmp/summary.out" 2>&1 &&
  grep -q "fits with P(fits) 0.50 only; the first listed that fits with P(fits) >= 0.9 is #3, c (1.10 s, +10.0 %)" \
    "$tmp/summary.out" || { echo "FAIL: summary.py"; cat "$tmp/summary.out"; fail=1; }
[ $fail = 0 ] && echo "jobs_test: sweep.sh (2 ranks), calibrate.sh and shortlist.sh passed"
exit $fail
