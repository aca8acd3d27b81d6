#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for SECONDS (default 60), all in parallel.
# Crashing inputs land in build-fuzz/artifacts/<target>/; keep each as a regression under
# tests/fuzz/regressions/<target>/ once fixed (the unit tests replay them).
#   bash jobs/fuzz.sh [SECONDS]
set -euo pipefail
LMSIM_EXTRA_PACKAGES="clang libclang-rt-14-dev" bash "$(dirname "$0")/deps.sh" --tests
root=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-60}
b=$root/build-fuzz
CC=clang CXX=clang++ cmake -S "$root" -B "$b" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLMSIM_FUZZ=ON -DLMSIM_BUILD_TESTS=OFF \
  -DLMSIM_BUILD_BENCH=OFF >/dev/null
cmake --build "$b" -j "$(nproc)" --target fuzz_csv fuzz_json fuzz_config_name fuzz_checkpoint fuzz_log >/dev/null
pids=()
for t in fuzz_csv fuzz_json fuzz_config_name fuzz_checkpoint fuzz_log; do
  c=${t#fuzz_}
  mkdir -p "$b/corpus/$c" "$b/artifacts/$t"
  cp -n "$root/tests/fuzz/corpus/$c/"* "$b/corpus/$c/" 2>/dev/null || true
  "$b/tests/fuzz/$t" -max_total_time="$secs" -print_final_stats=1 -artifact_prefix="$b/artifacts/$t/" \
    -max_len=4096 "$b/corpus/$c" >"$b/$t.log" 2>&1 &
  pids+=($!)
done
status=0
for i in "${!pids[@]}"; do wait "${pids[$i]}" || status=1; done
for t in fuzz_csv fuzz_json fuzz_config_name fuzz_checkpoint fuzz_log; do
  echo "$t: $(grep -E '^stat::number_of_executed_units' "$b/$t.log" | awk '{print $2}') runs in ${secs} s," \
    "corpus $(ls "$b/corpus/${t#fuzz_}" | wc -l), crashes $(ls "$b/artifacts/$t" | wc -l)"
done
exit $status
