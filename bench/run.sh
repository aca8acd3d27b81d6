#!/usr/bin/env bash
# All benchmarks, each printing its figures: simulate() speed, calibration accuracy and time (in-sample and
# leave-one-out, beside the paper's calibrated-Calculon numbers), and search throughput with 1 and 2 MPI ranks.
#   bash bench/run.sh            (after a Release build: bash jobs/main.sh or bash jobs/test.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/jobs/env.sh"
bash "$root/jobs/deps.sh" --tests
lmsim_build_release -DLMSIM_BUILD_TESTS=ON -DLMSIM_BUILD_BENCH=ON
echo "== simulate() speed (target: <= 1 us median for an 8-device dense configuration)"
"$lmsim_build/bench/simulate_bench" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
  --benchmark_min_time=0.2 2>/dev/null | grep -E "median|^Run on|CPU"
echo
echo "== simulate() instructions per call (callgrind: independent of the machine's load, for comparing builds)"
bash "$root/bench/simulate_instructions.sh" "$lmsim_build"
echo
echo "== calibration (targets: in-sample time MAPE <= 4 %, memory MAPE <= 5 %; LOO time <= 5 %, memory <= 6 %)"
OMP_NUM_THREADS=1 "$lmsim_build/bench/calibration_bench" "$@"
echo
echo "== memory settings read off measured peaks (identifiability: synthetic peaks from the simulator, 3 % noise)"
"$lmsim_build/bench/settings_reading_bench"
echo
echo "== streaming CSV reader (target: a 256 MiB CSV peaks under 300 MiB RSS)"
bash "$root/bench/csv_bench.sh" "$lmsim_build"
echo
echo "== search throughput (target: >= 2e6 configurations/s with 2 ranks; 1 -> 2 ranks >= 1.8x)"
bash "$root/bench/search_bench.sh" "$lmsim_build"
echo
echo "== public GPU calibration (A100 / H100 / B200 from data/public; issue targets are on a validation set lmsim never sees)"
OMP_NUM_THREADS=1 "$lmsim_build/bench/public_bench" "$@"
