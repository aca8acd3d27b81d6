#!/usr/bin/env bash
# `cmake --install` gives a relocatable tree: the installed lmsim finds its data after the tree is moved, and a
# small CMake project finds the libraries with find_package(lmsim) and predicts exactly like the CLI.
#   bash tests/install_test.sh BUILD_DIR
set -u
build=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
# DESTDIR keeps everything (the Python module's absolute site-packages path too) inside the temporary folder.
DESTDIR="$tmp/root" cmake --install "$build" --prefix /opt/lmsim >/dev/null || { echo "FAIL: cmake --install"; exit 1; }
mv "$tmp/root/opt/lmsim" "$tmp/moved"  # relocate the installed tree
unset LMSIM_DATA_DIR
lm="$tmp/moved/bin/lmsim"
"$lm" --version | grep -q "data: $tmp/moved/share/lmsim/data" || bad "moved lmsim does not find its data: $("$lm" --version)"
args=(--model Qwen3-1.7B --system v100_sxm2_32g --devices 8 --strategy dp2-tp4-pp1-cp1-RC)
want=$("$build/apps/lmsim" --log-level error predict "${args[@]}" --json | python3 -c \
  "import json,sys; j=json.load(sys.stdin); print(repr(j['iteration_time_s']), repr(j['max_peak_memory_bytes']))")
got=$("$lm" --log-level error predict "${args[@]}" --json | python3 -c \
  "import json,sys; j=json.load(sys.stdin); print(repr(j['iteration_time_s']), repr(j['max_peak_memory_bytes']))")
[ "$want" = "$got" ] || bad "moved lmsim predicts '$got', the build tree '$want'"
[ -f "$tmp/moved/lib/cmake/lmsim/lmsimConfig.cmake" ] || ls "$tmp/moved"/lib*/cmake/lmsim/lmsimConfig.cmake >/dev/null ||
  bad "no lmsimConfig.cmake"
[ -f "$tmp/moved/include/lmsim/simulator/simulator.hpp" ] || bad "headers not installed"
src=$(cd "$(dirname "$0")/find_package" && pwd)
if cmake -S "$src" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/moved" -DCMAKE_BUILD_TYPE=Release >"$tmp/cfg.log" 2>&1 &&
   cmake --build "$tmp/consumer" -j 2 >"$tmp/build.log" 2>&1; then
  got=$(LMSIM_DATA_DIR="$tmp/moved/share/lmsim/data" "$tmp/consumer/consumer" Qwen3-1.7B v100_sxm2_32g 8 \
        dp2-tp4-pp1-cp1-RC 2>/dev/null | python3 -c \
        "import json,sys; j=json.load(sys.stdin); print(repr(j['iteration_time_s']), repr(j['max_peak_memory_bytes']))")
  [ "$want" = "$got" ] || bad "find_package consumer predicts '$got', the CLI '$want'"
else
  bad "find_package(lmsim) project failed: $(cat "$tmp/cfg.log" "$tmp/build.log" | tail -n 15)"
fi
[ $fail = 0 ] && echo "install_test: relocatable install and find_package(lmsim) checked"
exit $fail
