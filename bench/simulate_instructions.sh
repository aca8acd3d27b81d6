#!/usr/bin/env bash
# Instructions per simulate() call, for each case of simulate_bench, counted by valgrind's callgrind. Unlike the
# nanosecond timings this count does not depend on the machine's load or clock, so it compares two builds of the
# hot path on a noisy machine: the same binary and case give the same count. Skipped without valgrind.
#   bash bench/simulate_instructions.sh [build-dir]
set -euo pipefail
build=${1:-build}
bench="$build/bench/simulate_bench"
if ! command -v valgrind >/dev/null || ! command -v callgrind_annotate >/dev/null; then
  echo "valgrind is not installed (apt-get install valgrind): instruction counts skipped"
  exit 0
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for case in $("$bench" --benchmark_list_tests=true); do
  file="$out/callgrind.out"
  # Count only inside simulate(); each simulate() builds one context, so make_ctx's calls are simulate()'s calls.
  valgrind --tool=callgrind --callgrind-out-file="$file" --toggle-collect='lmsim::simulate(*' \
    "$bench" --benchmark_filter="^$case\$" --benchmark_min_time=0.3 >/dev/null 2>&1
  total=$(callgrind_annotate "$file" | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  calls=$(callgrind_annotate --tree=calling "$file" | grep -o 'make_ctx([^)]*) ([0-9,]*x)' | head -1 |
    grep -o '([0-9,]*x)' | tr -d '(),x')
  if [[ -z "$total" || -z "$calls" || "$calls" == 0 ]]; then
    echo "simulate_instructions: could not read callgrind's counts for $case" >&2
    exit 1
  fi
  printf '%-48s %7d instructions per call (%d calls)\n' "$case" $((total / calls)) "$calls"
done
