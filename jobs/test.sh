#!/usr/bin/env bash
# README command 2: install what is missing, build, run the whole test suite (unit, CLI, MPI, job scripts, format), then
# the unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer.
set -euo pipefail
here=$(dirname "$0")
bash "$here/deps.sh" --tests
source "$here/env.sh"
jobs=$(nproc)
cmake -S "$lmsim_root" -B "$lmsim_build" -DCMAKE_BUILD_TYPE=Release -DLMSIM_BUILD_TESTS=ON -DLMSIM_BUILD_BENCH=ON >/dev/null
cmake --build "$lmsim_build" -j "$jobs"
(cd "$lmsim_build" && ctest --output-on-failure -j "$jobs")
asan=${LMSIM_ASAN_BUILD_DIR:-$lmsim_root/build-asan}
cmake -S "$lmsim_root" -B "$asan" -DCMAKE_BUILD_TYPE=Debug -DLMSIM_SANITIZE=ON -DLMSIM_BUILD_BENCH=OFF -DLMSIM_PYTHON=OFF >/dev/null
cmake --build "$asan" -j "$jobs" --target unit_tests lmsim
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
(cd "$asan" && ctest --output-on-failure -j "$jobs" -E "mpi_|jobs_|install_|^format$")
echo "lmsim: all tests passed (Release and ASan+UBSan)"
